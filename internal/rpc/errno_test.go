package rpc

import (
	"strconv"
	"syscall"
)

var strconvItoa = strconv.Itoa

var syscallECONNRESET = syscall.ECONNRESET

func itoa(i int) string {
	return strconvItoa(i)
}
