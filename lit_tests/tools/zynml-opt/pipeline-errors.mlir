// Unknown passes and bad options are located errors in the pipeline (flags become one)
// and exit code 1; no traceback, nothing on stdout.
// RUN: not zynml-opt %s --frobnicate 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(cse,frobnicate)' 2>&1 | filecheck %s --check-prefix=UNKNOWN-PIPE
// RUN: not zynml-opt %s --cir-to-linalg=named-ops=maybe 2>&1 | filecheck %s --check-prefix=BAD-VALUE
// RUN: not zynml-opt %s --cir-verify=bogus=1 2>&1 | filecheck %s --check-prefix=BAD-OPTION
// RUN: not zynml-opt %s --canonicalize=bogus=1 2>&1 | filecheck %s --check-prefix=BAD-UPSTREAM
// RUN: not zynml-opt %s --pass-pipeline='builtin.module(cse' 2>&1 | filecheck %s --check-prefix=UNBALANCED
// RUN: not zynml-opt %s --cse --pass-pipeline='builtin.module(cse)' 2>&1 | filecheck %s --check-prefix=BOTH
// RUN: not zynml-opt %s --verify-each=maybe 2>&1 | filecheck %s --check-prefix=BOOL
// RUN: not zynml-opt %s %s 2>&1 | filecheck %s --check-prefix=TWO-INPUTS

func.func @f() {
  return
}

// UNKNOWN: <pass-pipeline>:1:16: error: '--frobnicate' is neither an option of zynml-opt nor a registered pass; zynml passes: cir-verify, cir-shape-propagation, cir-insert-checks, cir-raise-attention, cir-join-stores, cir-to-linalg
// UNKNOWN-NEXT: builtin.module(frobnicate)
// UNKNOWN-NEXT: {{^               \^}}
// UNKNOWN-NOT: Traceback
// UNKNOWN-PIPE: <pass-pipeline>:1:20: error: 'frobnicate' does not refer to a registered pass or pass pipeline
// BAD-VALUE: <pass-pipeline>:1:16: error: option 'named-ops' of 'cir-to-linalg' expects bool, got 'maybe'
// BAD-OPTION: error: unknown option 'bogus' of 'cir-verify'; options: none
// BAD-UPSTREAM: error: {{.*}}no such option bogus
// UNBALANCED: <pass-pipeline>:1:1: error: unbalanced brackets in pass pipeline
// BOTH: zynml-opt: error: '--pass-pipeline' cannot be used with individual pass flags
// BOOL: zynml-opt: error: '--verify-each=maybe': expected true or false, got 'maybe'
// TWO-INPUTS: zynml-opt: error: expected one input file, got 2
