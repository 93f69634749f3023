package sshlayer

import (
	"os"

	"golang.org/x/sys/unix"
)

// Control characters by RFC 4254 §8 opcode.
var ttyChars = map[byte]int{
	1: unix.VINTR, 2: unix.VQUIT, 3: unix.VERASE, 4: unix.VKILL, 5: unix.VEOF,
	6: unix.VEOL, 7: unix.VEOL2, 8: unix.VSTART, 9: unix.VSTOP, 10: unix.VSUSP,
	12: unix.VREPRINT, 13: unix.VWERASE, 14: unix.VLNEXT, 18: unix.VDISCARD,
}

// ttyCharDisabled is how OpenSSH's ssh sends a control character its
// terminal has disabled (special_char_encode); 0xff itself cannot be sent.
const ttyCharDisabled = 255

// ttyFlag is a termios flag bit and the word that holds it.
type ttyFlag struct {
	word int // 0 iflag, 1 lflag, 2 oflag, 3 cflag
	bit  uint32
}

var ttyFlags = map[byte]ttyFlag{
	30: {0, unix.IGNPAR}, 31: {0, unix.PARMRK}, 32: {0, unix.INPCK}, 33: {0, unix.ISTRIP},
	34: {0, unix.INLCR}, 35: {0, unix.IGNCR}, 36: {0, unix.ICRNL}, 37: {0, unix.IUCLC},
	38: {0, unix.IXON}, 39: {0, unix.IXANY}, 40: {0, unix.IXOFF}, 41: {0, unix.IMAXBEL},
	42: {0, unix.IUTF8},
	50: {1, unix.ISIG}, 51: {1, unix.ICANON}, 52: {1, unix.XCASE}, 53: {1, unix.ECHO},
	54: {1, unix.ECHOE}, 55: {1, unix.ECHOK}, 56: {1, unix.ECHONL}, 57: {1, unix.NOFLSH},
	58: {1, unix.TOSTOP}, 59: {1, unix.IEXTEN}, 60: {1, unix.ECHOCTL}, 61: {1, unix.ECHOKE},
	62: {1, unix.PENDIN},
	70: {2, unix.OPOST}, 71: {2, unix.OLCUC}, 72: {2, unix.ONLCR}, 73: {2, unix.OCRNL},
	74: {2, unix.ONOCR}, 75: {2, unix.ONLRET},
	92: {3, unix.PARENB}, 93: {3, unix.PARODD},
}

// applyTTYModes sets the client's terminal modes on tty, as sshd does.
// Unknown opcodes and speeds (meaningless on a pseudo-terminal) are
// ignored.
func applyTTYModes(tty *os.File, modes []ttyMode) error {
	if len(modes) == 0 {
		return nil
	}
	fd := int(tty.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return err
	}
	for _, m := range modes {
		if i, ok := ttyChars[m.Op]; ok {
			c := uint8(m.Arg)
			if m.Arg == ttyCharDisabled {
				// Linux's _POSIX_VDISABLE is 0: sshd maps 255 so.
				c = 0
			}
			t.Cc[i] = c
			continue
		}
		switch m.Op {
		case 90, 91: // CS7, CS8
			size := uint32(unix.CS8)
			if m.Op == 90 {
				size = unix.CS7
			}
			if m.Arg != 0 {
				t.Cflag = t.Cflag&^unix.CSIZE | size
			}
			continue
		}
		f, ok := ttyFlags[m.Op]
		if !ok {
			continue
		}
		w := [...]*uint32{&t.Iflag, &t.Lflag, &t.Oflag, &t.Cflag}[f.word]
		if m.Arg != 0 {
			*w |= f.bit
		} else {
			*w &^= f.bit
		}
	}
	return unix.IoctlSetTermios(fd, unix.TCSETS, t)
}
