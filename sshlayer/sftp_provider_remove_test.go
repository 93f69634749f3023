package sshlayer

import (
	"context"
	"encoding/binary"
	"strings"
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
