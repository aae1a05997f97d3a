// Command layoutprobe is built with every Go release gi supports; its DWARF
// is where runtimelayout's table of runtime layouts for stripped binaries comes
// from. It uses pprof labels so that their types are linked in.
package main

import (
	"context"
	"fmt"
	"runtime/pprof"
)

func main() {
	pprof.Do(context.Background(), pprof.Labels("k", "v"), func(ctx context.Context) {
		fmt.Println(pprof.Label(ctx, "k"))
	})
}
