package rpc

import (
	"context"
	"encoding/json"

	"github.com/sessiond/sessiond/internal/api"
)

// errNoAccounts: the backend has no accounts (a test's fake).
var errNoAccounts = &api.Error{Kind: api.KindInternal, Msg: "this backend has no accounts"}

func hSwitchAccount(ctx context.Context, c *conn, p *api.SwitchAccountParams) (any, error) {
	ab, ok := c.srv.o.Backend.(api.AccountBackend)
	if !ok {
		return nil, errNoAccounts
	}
	return ab.SwitchAccount(ctx, *p)
}

func hListAccounts(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
	var p api.ListAccountsParams
	if err := decodeValid(params, &p); err != nil {
		return nil, err
	}
	ab, ok := c.srv.o.Backend.(api.AccountBackend)
	if !ok {
		return nil, errNoAccounts
	}
	return ab.ListAccounts(ctx, p)
}
