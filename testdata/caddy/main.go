// Command caddy is the Caddy web server (v2.11.9, its standard modules,
// from the module proxy), built with cgo: the big binary of gi's
// benchmarks (82 MB, 4,000 functions under github.com/caddyserver).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() { caddycmd.Main() }
