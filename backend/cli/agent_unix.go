//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// execBinary replaces this process with bin; it returns only on failure.
func execBinary(bin string, argv, env []string) error { return syscall.Exec(bin, argv, env) }

// sameOwnerPrivate checks that bin is a regular file owned by self's
// owner and not writable by group or others.
func sameOwnerPrivate(self, bin string) error {
	si, err := os.Stat(self)
	if err != nil {
		return err
	}
	bi, err := os.Lstat(bin)
	if err != nil {
		return err
	}
	if !bi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if bi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("mode %v: writable by group or others", bi.Mode().Perm())
	}
	ss, ok1 := si.Sys().(*syscall.Stat_t)
	bs, ok2 := bi.Sys().(*syscall.Stat_t)
	if ok1 && ok2 && ss.Uid != bs.Uid {
		return fmt.Errorf("owned by uid %d, gseproc by uid %d", bs.Uid, ss.Uid)
	}
	return nil
}
