//go:build !linux

package service

// renameNoReplace renames from to to unless to exists (an error that is
// fs.ErrExist then, from is left): linkNoReplace.
func renameNoReplace(from, to string) error { return linkNoReplace(from, to) }
