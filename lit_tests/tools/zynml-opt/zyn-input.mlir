// .zyn files are ZynML source (or any file with -x=zyn); --zyn-input gives input types.
// RUN: zynml-opt -x=zyn %S/Inputs/scale.zyn.txt --zyn-input=x=?x? | filecheck %s --check-prefix=DYNAMIC
// RUN: zynml-opt -x zyn %S/Inputs/scale.zyn.txt --zyn-input=x=3x5:f16 | filecheck %s --check-prefix=STATIC
// RUN: not zynml-opt -x=zyn %S/Inputs/scale.zyn.txt --zyn-input=x=3x5:f99 2>&1 | filecheck %s --check-prefix=BAD-TYPE
// RUN: not zynml-opt -x=zyn %S/Inputs/scale.zyn.txt --zyn-input=x=3x5 --zyn-input=n=:f32=4 2>&1 | filecheck %s --check-prefix=BAD-TYPE
// RUN: not zynml-opt -x=zyn %S/Inputs/scale.zyn.txt --zyn-input=y=3 2>&1 | filecheck %s --check-prefix=MISSING

// DYNAMIC: func.func @main({{.*}}: tensor<?x?xf32>) -> tensor<?x?xf32>
// STATIC: func.func @main({{.*}}: tensor<3x5xf16>) -> tensor<?x?xf16>
// BAD-TYPE: zynml-opt: error: '--zyn-input={{.*}}': expected NAME=DIMS[:DTYPE]
// MISSING: scale.zyn.txt:1:17: error: missing input 'x'
