// Package readme holds no code: its tests check that the repository's
// README.md works as written for a new user. Every Go block is built as a
// program of an outside module that requires proxgen through a replace
// directive and is run, its output compared with the text block after
// it; the shell commands chain (the serving examples read what the first
// command writes, the image they send is in the repository, the first
// command needs nothing outside the checkout); and the documented build
// gives static binaries.
package readme
