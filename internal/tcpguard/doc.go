// Package tcpguard guards loopd's optional TCP listener (--http) before
// any request reaches a handler.
//
// Anyone on the machine can connect to a loopback port, so what a
// connection does before it is authorized must cost the daemon nothing it
// needs: the port is held on both loopback addresses (ListenLoopback), a
// connection whose other end another local user owns is closed at once
// (PeerUID, asked of the kernel by sock_diag), the open connections are
// capped below the descriptor limit (CapListener), and refusals are
// logged at most once per interval (Refusals). The bearer token and the dashboard
// session, which authorize requests, are the daemon's and the dashboard's.
package tcpguard
