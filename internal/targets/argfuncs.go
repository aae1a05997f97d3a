package targets

// ArgFuncs are the functions of testdata/argfuncs, one per type class of
// argument and result gi reads.
var ArgFuncs = []string{"main.ints", "main.floats", "main.leafFloat", "main.complexes", "main.Vec.Scale", "main.mixed",
	"main.manyFloats", "main.anyFloat", "main.sameFloat", "main.dropFloat", "main.floatsOnStack", "main.boolsAndString", "main.pointer", "main.slices", "main.arrays",
	"main.structs", "main.ifaces", "main.boxed", "main.containers", "main.twelve", "main.Point.Dist", "main.query", "main.withDefer", "main.threeIntsAndString",
	"main.stackSlice", "main.Point.Unnamed"}
