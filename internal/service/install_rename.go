package service

import "os"

// linkNoReplace moves from to to unless to exists (an error that is
// fs.ErrExist then, from is left): a hard link, which never replaces,
// then the unlink of from.
func linkNoReplace(from, to string) error {
	if err := os.Link(from, to); err != nil {
		return err
	}
	return os.Remove(from)
}
