//go:build !unix

package cli

import "errors"

var errNoExec = errors.New("exec is not supported on this system")

func execBinary(string, []string, []string) error { return errNoExec }

func sameOwnerPrivate(string, string) error { return errNoExec }
