// --list-passes and --help name every zynml pass with its description and options.
// RUN: zynml-opt --list-passes | filecheck %s
// RUN: zynml-opt --help | filecheck %s --check-prefixes=HELP
// RUN: zynml-opt -h | filecheck %s --check-prefixes=HELP

// CHECK: --cir-verify {{ *}}Check cir invariants IRDL cannot express
// CHECK: --cir-shape-propagation {{ *}}Make compute results and body functions static
// CHECK: --cir-to-linalg {{ *}}Lower cir.compute to linalg on tensors
// CHECK-NEXT: named-ops=<bool>  (default: true)

// HELP: USAGE: zynml-opt [options] [passes] [input file | -]
// HELP: --pass-pipeline=PIPELINE
// HELP: --mlir-pass-pipeline-crash-reproducer=FILE
// HELP: --split-input-file
// HELP: --verify-diagnostics
// HELP: --cir-verify
// HELP: --cir-shape-propagation
// HELP: --cir-to-linalg
