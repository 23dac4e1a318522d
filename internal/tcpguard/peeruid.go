package tcpguard

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ErrPeerNotLocal is PeerUID's answer for a peer whose socket is not on
// this machine (or already gone): nobody to ask about.
var ErrPeerNotLocal = errors.New("the peer's socket is not on this machine")

// PeerUID returns the uid that owns the other end of a TCP connection
// accepted from this machine, asking the kernel with one sock_diag
// (inet_diag) lookup of the peer's exact socket, as ss(8) does. It needs
// no privilege: every user may look up any socket's owner.
//
// A TCP connection carries no credentials (SO_PEERCRED is for Unix
// sockets): this is how the TCP listener tells its owner's connections
// from another local user's before any of them takes a slot.
func PeerUID(local, remote *net.TCPAddr) (int, error) {
	la, ok1 := netip.AddrFromSlice(local.IP)
	ra, ok2 := netip.AddrFromSlice(remote.IP)
	if !ok1 || !ok2 {
		return 0, ErrPeerNotLocal
	}
	la, ra = la.Unmap(), ra.Unmap()
	family := uint8(unix.AF_INET6)
	if ra.Is4() {
		family = unix.AF_INET
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	// Answers are read with a deadline: a kernel that never answers must
	// not hold the accept loop.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000}); err != nil {
		return 0, err
	}

	// struct nlmsghdr (16 bytes), then struct inet_diag_req_v2 (56): the
	// peer's socket has the peer's address as its source and ours as its
	// destination. Ports and addresses are in network byte order.
	const reqLen = unix.SizeofNlMsghdr + 56
	var req [reqLen]byte
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], reqLen)
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // seq
	d := req[unix.SizeofNlMsghdr:]
	d[0], d[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(d[4:], 0xffffffff) // every state
	id := d[8:]
	binary.BigEndian.PutUint16(id[0:], uint16(remote.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(local.Port))
	if family == unix.AF_INET {
		r4, l4 := ra.As4(), la.As4()
		copy(id[4:], r4[:])
		copy(id[20:], l4[:])
	} else {
		r16, l16 := ra.As16(), la.As16()
		copy(id[4:], r16[:])
		copy(id[20:], l16[:])
	}
	ne.PutUint32(id[40:], 0xffffffff) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], 0xffffffff)
	if err := unix.Sendto(fd, req[:], 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	var buf [1024]byte
	n, _, err := unix.Recvfrom(fd, buf[:], 0)
	if err != nil {
		return 0, err
	}
	if n < unix.SizeofNlMsghdr {
		return 0, errors.New("sock_diag: short answer")
	}
	switch ne.Uint16(buf[4:]) {
	case unix.NLMSG_ERROR:
		if n >= unix.SizeofNlMsghdr+4 {
			if errno := int32(ne.Uint32(buf[unix.SizeofNlMsghdr:])); errno == -int32(unix.ENOENT) {
				return 0, ErrPeerNotLocal
			} else if errno != 0 {
				return 0, unix.Errno(-errno)
			}
		}
		return 0, errors.New("sock_diag: error answer")
	case unix.SOCK_DIAG_BY_FAMILY:
	default:
		return 0, errors.New("sock_diag: unexpected answer")
	}
	// struct inet_diag_msg: family, state, timer, retrans (4 bytes), the
	// socket id (48), expires, rqueue, wqueue (12), then uid.
	const uidAt = unix.SizeofNlMsghdr + 4 + 48 + 12
	if n < uidAt+4 {
		return 0, errors.New("sock_diag: short answer")
	}
	return int(ne.Uint32(buf[uidAt:])), nil
}
