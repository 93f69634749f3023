//go:build unix

package sshlayer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSFTPProviderRemoveRefusesSlashEntry: a recursive Remove of a
// directory whose host lists an entry named "/" (which pkg/sftp keeps,
// the last element of the name) fails saying so after one listing. Joined
// to the directory, "/" named the directory again, and Remove recursed
// into it until its ctx ended, or its goroutine's stack ran out, which
// ends the process.
func TestSFTPProviderRemoveRefusesSlashEntry(t *testing.T) {
	const (
		fxpReaddir = 12
		fxpRmdir   = 15
	)
	lstats, listed := 0, false
	p := NewSFTPProvider(scriptedSFTPServer(t, func(typ byte, _ []byte) []byte {
		switch typ {
		case fxpLstat:
			lstats++
			return sftpModeReply(0o040755)
		case fxpOpendir:
			listed = false
			return append([]byte{fxpHandle}, wireString("d")...)
		case fxpReaddir:
			if listed {
				return sftpStatusReply(1, "") // SSH_FX_EOF
			}
			listed = true
			b := binary.BigEndian.AppendUint32([]byte{fxpName}, 1)
			b = append(b, wireString("/")...)
			b = append(b, wireString("drwxr-xr-x /")...)
			return append(b, sftpModeReply(0o040755)[1:]...)
		}
		return sftpStatusReply(0, "") // close, rmdir: OK
	}))
	// A guard: without the refusal the recursion ends only with ctx.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.Remove(ctx, "/d", true)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), `entry named "/"`) {
		t.Fatalf("Remove: %v after %d lstats; want an error naming the entry \"/\"", err, lstats)
	}
	if lstats != 1 {
		t.Errorf("the host was asked %d lstats; want 1, of /d", lstats)
	}
}

// TestSFTPProviderRemoveBoundsDepth: a recursive Remove of a directory
// whose host lists a fresh subdirectory at every level fails at a bound,
// naming the path's start and the bound, removing nothing: past
// maxRemoveDepth levels of short names, past maxRemovePath bytes of long
// ones. It went down until its ctx ended, each level's path longer.
func TestSFTPProviderRemoveBoundsDepth(t *testing.T) {
	const (
		fxpReaddir = 12
		fxpRmdir   = 15
	)
	for _, tc := range []struct {
		name, entry, bound string
	}{
		{"deep", "a", fmt.Sprintf("%d levels", maxRemoveDepth)},
		{"long", strings.Repeat("b", 250), fmt.Sprintf("%d bytes", maxRemovePath)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed, rmdirs := false, 0
			p := NewSFTPProvider(scriptedSFTPServer(t, func(typ byte, _ []byte) []byte {
				switch typ {
				case fxpLstat:
					return sftpModeReply(0o040755)
				case fxpOpendir:
					listed = false
					return append([]byte{fxpHandle}, wireString("d")...)
				case fxpReaddir:
					if listed {
						return sftpStatusReply(1, "") // SSH_FX_EOF
					}
					listed = true
					b := binary.BigEndian.AppendUint32([]byte{fxpName}, 1)
					b = append(b, wireString(tc.entry)...)
					b = append(b, wireString("drwxr-xr-x "+tc.entry)...)
					return append(b, sftpModeReply(0o040755)[1:]...)
				case fxpRmdir:
					rmdirs++
				}
				return sftpStatusReply(0, "") // close, rmdir: OK
			}))
			// A guard: without the bound the descent ends only with ctx.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := p.Remove(ctx, "/d", true)
			if err == nil || ctx.Err() != nil || !errors.Is(err, syscall.ENAMETOOLONG) ||
				!strings.Contains(err.Error(), ("/d/" + tc.entry + "/" + tc.entry)[:6]) || !strings.Contains(err.Error(), tc.bound) {
				t.Fatalf("Remove: %v; want ENAMETOOLONG naming the path's start and the bound (%s)", err, tc.bound)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("Remove's error is %d bytes long: the whole path, not its start", len(err.Error()))
			}
			if rmdirs != 0 {
				t.Errorf("the host was asked %d rmdirs; want none, the removal refused", rmdirs)
			}
		})
	}
}
