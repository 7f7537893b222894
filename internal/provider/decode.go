package provider

import (
	"encoding/json"
	"errors"
)

// Decode unmarshals data into v leniently: a field whose value has the
// wrong type is left as it was and reported (bad), the rest is read; a
// damaged field must not cost a whole message (a request the provider
// waits on, the message that ends a turn). ok is false only for data that
// is not JSON (or not the shape of v at all).
func Decode(data []byte, v any) (ok bool, bad *json.UnmarshalTypeError) {
	err := json.Unmarshal(data, v)
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &bad):
		return true, bad
	}
	return false, nil
}
