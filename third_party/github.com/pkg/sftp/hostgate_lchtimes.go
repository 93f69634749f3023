package sftp

import (
	"context"
	"time"
)

// hostgate: change 34 (HOSTGATE.md). The client's side of
// lsetstat@openssh.com (change 21 is the server's): SETSTAT's attributes
// set on a path without following a symbolic link there.

// sshFxpLsetstatPacket is an lsetstat@openssh.com request, SETSTAT's
// fields after the extension's name, as OpenSSH's sftp sends it.
type sshFxpLsetstatPacket struct {
	ID    uint32
	Path  string
	Flags uint32
	Attrs any
}

func (p *sshFxpLsetstatPacket) id() uint32 { return p.ID }

func (p *sshFxpLsetstatPacket) MarshalBinary() ([]byte, error) {
	const ext = "lsetstat@openssh.com"
	l := 4 + 1 + 4 + // uint32(length) + byte(type) + uint32(id)
		4 + len(ext) +
		4 + len(p.Path) +
		4 // uint32(flags)

	b := make([]byte, 4, l)
	b = append(b, sshFxpExtended)
	b = marshalUint32(b, p.ID)
	b = marshalString(b, ext)
	b = marshalString(b, p.Path)
	b = marshalUint32(b, p.Flags)
	return marshal(b, p.Attrs), nil
}

// LchtimesContext is ChtimesContext of path itself: a symbolic link's own
// times, not its target's, through the lsetstat@openssh.com extension
// (OpenSSH's sftp-server has it since 8.0, this package's Server on Linux
// and macOS). A server that does not offer it (HasExtension) answers
// with an error, "unsupported" or another; the caller checks first. As
// ChtimesContext, times go as seconds in 32 bits, which the caller
// checks, and ctx's end returns its error at once.
func (c *Client) LchtimesContext(ctx context.Context, path string, atime, mtime time.Time) error {
	type times struct {
		Atime uint32
		Mtime uint32
	}
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpLsetstatPacket{
		ID:    id,
		Path:  path,
		Flags: sshFileXferAttrACmodTime,
		Attrs: times{uint32(atime.Unix()), uint32(mtime.Unix())},
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return unimplementedPacketErr(typ)
	}
}
