module github.com/sessiond/sessiond

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/lmittmann/tint v1.2.1 // indirect
	github.com/shirou/gopsutil/v4 v4.26.10 // indirect
	github.com/sourcegraph/jsonrpc2 v0.2.3 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
