// Package tcpguard guards loopd's optional TCP listener (--http) before
// any request reaches a handler.
//
// Anyone on the machine can connect to a loopback port, so what a
// connection does before it is authorized must cost the daemon nothing it
// needs: the listener binds only loopback unless told otherwise (Listen)
// and holds its port on both loopback addresses (ListenLoopback), a
// connection whose other end another local user owns is closed at once
// (PeerUID, asked of the kernel by sock_diag), the open connections are
// capped below the descriptor limit (CapListener), a connection without
// a request is closed after a timeout and one after an error answer at
// once (NewServer, CloseOnError), and refusals are logged at most once
// per interval (Refusals). The bearer token
// (LoadToken, TokenOK) is checked here; whether a request is admitted
// (the token or a dashboard session) is decided once, by the daemon with
// the dashboard's Auth.
package tcpguard
