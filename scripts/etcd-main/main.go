// The etcd server, built from its published module: `go install go.etcd.io/etcd/server/v3` is
// refused because etcd's go.mod carries replace lines, so this main package imports it instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
