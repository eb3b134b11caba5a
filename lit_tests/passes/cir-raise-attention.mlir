// cir-raise-attention replaces a compute whose body is attention written out element by
// element (the spec's three loops: row max, sum of exponentials, weighted values, each
// recomputing the same masked score) with one cir.attention, and erases the body
// function. The scale folds to a constant (1 / sqrt(4) here). Bodies that differ
// anywhere (the sum loop scales its score differently, or spells its causal condition
// differently) stay as they are. A causal condition on the loops (`j <= i + c`, alone or
// `and` a mask) becomes causal_offset = c.
// RUN: zynml-opt %s --split-input-file --cir-raise-attention | filecheck %s

// CHECK-LABEL: func.func @attention(
// CHECK-SAME: [[Q:%[a-z0-9]+]]: tensor<2x3x4xf32>, [[K:%[a-z0-9]+]]: tensor<2x5x4xf32>, [[V:%[a-z0-9]+]]: tensor<2x5x6xf32>, [[MASK:%[a-z0-9]+]]: tensor<3x5xi1>
// CHECK: [[SCALE:%[a-z0-9_]+]] = arith.constant 5.000000e-01 : f32
// CHECK: [[O:%[0-9]+]] = "cir.attention"([[Q]], [[K]], [[V]], [[SCALE]], [[MASK]]) {mask_dims = array<i64: 1, 2>, names = ["Q", "K", "V", "mask"], operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, f32, tensor<3x5xi1>) -> tensor<2x3x6xf32>
// CHECK: return [[O]]
// CHECK-NOT: cir.compute
// CHECK-NOT: @attention_body
func.func @attention(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>) -> tensor<2x3x6xf32> {
  %o = "cir.compute"(%q, %k, %v, %mask) {kind = "attention", body = @attention_body, names = ["Q", "K", "V", "mask"],
      operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<3x5xi1>) -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}
func.func private @attention_body(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>, %out: tensor<2x3x6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0.0 : f32
  %inf = arith.constant 0x7F800000 : f32
  %ninf = arith.negf %inf : f32
  scf.for %h = %c0 to %c2 step %c1 {
    scf.for %i = %c0 to %c3 step %c1 {
      %max = scf.for %j = %c0 to %c5 step %c1 iter_args(%m = %ninf) -> (f32) {
        %allowed = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %bigger = arith.maximumf %m, %score : f32
          scf.yield %bigger : f32
        } else {
          scf.yield %m : f32
        }
        scf.yield %next : f32
      }
      %sum = scf.for %j = %c0 to %c5 step %c1 iter_args(%l = %zero) -> (f32) {
        %allowed = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %shifted = arith.subf %score, %max : f32
          %e = math.exp %shifted : f32
          %added = arith.addf %l, %e : f32
          scf.yield %added : f32
        } else {
          scf.yield %l : f32
        }
        scf.yield %next : f32
      }
      scf.for %e = %c0 to %c6 step %c1 {
        %o = scf.for %j = %c0 to %c5 step %c1 iter_args(%acc_o = %zero) -> (f32) {
          %allowed = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
          %next = scf.if %allowed -> (f32) {
            %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
              %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
              %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
              %p = arith.mulf %a, %b : f32
              %s = arith.addf %acc, %p : f32
              scf.yield %s : f32
            }
            %n = arith.index_cast %c4 : index to i64
            %nf = arith.sitofp %n : i64 to f32
            %root = math.sqrt %nf : f32
            %score = arith.divf %dot, %root : f32
            %shifted = arith.subf %score, %max : f32
            %w = math.exp %shifted : f32
            %weight = arith.divf %w, %sum : f32
            %x = "cir.load"(%v, %h, %j, %e) : (tensor<2x5x6xf32>, index, index, index) -> f32
            %wx = arith.mulf %weight, %x : f32
            %added = arith.addf %acc_o, %wx : f32
            scf.yield %added : f32
          } else {
            scf.yield %acc_o : f32
          }
          scf.yield %next : f32
        }
        "cir.store"(%o, %out, %h, %i, %e) : (f32, tensor<2x3x6xf32>, index, index, index) -> ()
      }
    }
  }
  return
}



// -----

// Causal: `i >= j` in the three loops -> causal_offset = 0 (no mask operand).
// CHECK-LABEL: func.func @causal(
// CHECK-SAME: [[Q:%[a-z0-9]+]]: tensor<2x3x4xf32>, [[K:%[a-z0-9]+]]: tensor<2x5x4xf32>, [[V:%[a-z0-9]+]]: tensor<2x5x6xf32>, {{%[a-z0-9]+}}: tensor<3x5xi1>
// CHECK: [[SCALE:%[a-z0-9_]+]] = arith.constant 5.000000e-01 : f32
// CHECK: [[O:%[0-9]+]] = "cir.attention"([[Q]], [[K]], [[V]], [[SCALE]]) {causal_offset = 0 : i64, names = ["Q", "K", "V", "mask"], operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0>}
// CHECK: return [[O]]
// CHECK-NOT: cir.compute
// CHECK-NOT: @causal_body
func.func @causal(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>) -> tensor<2x3x6xf32> {
  %o = "cir.compute"(%q, %k, %v, %mask) {kind = "attention", body = @causal_body, names = ["Q", "K", "V", "mask"],
      operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<3x5xi1>) -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}
func.func private @causal_body(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>, %out: tensor<2x3x6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0.0 : f32
  %inf = arith.constant 0x7F800000 : f32
  %ninf = arith.negf %inf : f32
  scf.for %h = %c0 to %c2 step %c1 {
    scf.for %i = %c0 to %c3 step %c1 {
      %max = scf.for %j = %c0 to %c5 step %c1 iter_args(%m = %ninf) -> (f32) {
        %allowed = arith.cmpi sge, %i, %j : index
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %bigger = arith.maximumf %m, %score : f32
          scf.yield %bigger : f32
        } else {
          scf.yield %m : f32
        }
        scf.yield %next : f32
      }
      %sum = scf.for %j = %c0 to %c5 step %c1 iter_args(%l = %zero) -> (f32) {
        %allowed = arith.cmpi sge, %i, %j : index
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %shifted = arith.subf %score, %max : f32
          %e = math.exp %shifted : f32
          %added = arith.addf %l, %e : f32
          scf.yield %added : f32
        } else {
          scf.yield %l : f32
        }
        scf.yield %next : f32
      }
      scf.for %e = %c0 to %c6 step %c1 {
        %o = scf.for %j = %c0 to %c5 step %c1 iter_args(%acc_o = %zero) -> (f32) {
          %allowed = arith.cmpi sge, %i, %j : index
          %next = scf.if %allowed -> (f32) {
            %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
              %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
              %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
              %p = arith.mulf %a, %b : f32
              %s = arith.addf %acc, %p : f32
              scf.yield %s : f32
            }
            %n = arith.index_cast %c4 : index to i64
            %nf = arith.sitofp %n : i64 to f32
            %root = math.sqrt %nf : f32
            %score = arith.divf %dot, %root : f32
            %shifted = arith.subf %score, %max : f32
            %w = math.exp %shifted : f32
            %weight = arith.divf %w, %sum : f32
            %x = "cir.load"(%v, %h, %j, %e) : (tensor<2x5x6xf32>, index, index, index) -> f32
            %wx = arith.mulf %weight, %x : f32
            %added = arith.addf %acc_o, %wx : f32
            scf.yield %added : f32
          } else {
            scf.yield %acc_o : f32
          }
          scf.yield %next : f32
        }
        "cir.store"(%o, %out, %h, %i, %e) : (f32, tensor<2x3x6xf32>, index, index, index) -> ()
      }
    }
  }
  return
}

// -----

// Causal with a KV cache of 2 earlier keys and a mask: `j <= i + 2 and mask[i, j]`.
// CHECK-LABEL: func.func @causal_masked(
// CHECK-SAME: [[Q:%[a-z0-9]+]]: tensor<2x3x4xf32>, [[K:%[a-z0-9]+]]: tensor<2x5x4xf32>, [[V:%[a-z0-9]+]]: tensor<2x5x6xf32>, [[MASK:%[a-z0-9]+]]: tensor<3x5xi1>
// CHECK: [[O:%[0-9]+]] = "cir.attention"([[Q]], [[K]], [[V]], {{%[a-z0-9_]+}}, [[MASK]]) {causal_offset = 2 : i64, mask_dims = array<i64: 1, 2>, names = ["Q", "K", "V", "mask"], operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>}
// CHECK-NOT: cir.compute
func.func @causal_masked(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>) -> tensor<2x3x6xf32> {
  %o = "cir.compute"(%q, %k, %v, %mask) {kind = "attention", body = @causal_masked_body, names = ["Q", "K", "V", "mask"],
      operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<3x5xi1>) -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}
func.func private @causal_masked_body(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>, %out: tensor<2x3x6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0.0 : f32
  %inf = arith.constant 0x7F800000 : f32
  %ninf = arith.negf %inf : f32
  scf.for %h = %c0 to %c2 step %c1 {
    scf.for %i = %c0 to %c3 step %c1 {
      %max = scf.for %j = %c0 to %c5 step %c1 iter_args(%m = %ninf) -> (f32) {
        %limit = arith.addi %i, %c2 : index
        %causal = arith.cmpi sle, %j, %limit : index
        %bit = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
        %allowed = arith.andi %causal, %bit : i1
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %bigger = arith.maximumf %m, %score : f32
          scf.yield %bigger : f32
        } else {
          scf.yield %m : f32
        }
        scf.yield %next : f32
      }
      %sum = scf.for %j = %c0 to %c5 step %c1 iter_args(%l = %zero) -> (f32) {
        %limit = arith.addi %i, %c2 : index
        %causal = arith.cmpi sle, %j, %limit : index
        %bit = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
        %allowed = arith.andi %causal, %bit : i1
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %shifted = arith.subf %score, %max : f32
          %e = math.exp %shifted : f32
          %added = arith.addf %l, %e : f32
          scf.yield %added : f32
        } else {
          scf.yield %l : f32
        }
        scf.yield %next : f32
      }
      scf.for %e = %c0 to %c6 step %c1 {
        %o = scf.for %j = %c0 to %c5 step %c1 iter_args(%acc_o = %zero) -> (f32) {
          %limit = arith.addi %i, %c2 : index
          %causal = arith.cmpi sle, %j, %limit : index
          %bit = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
          %allowed = arith.andi %causal, %bit : i1
          %next = scf.if %allowed -> (f32) {
            %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
              %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
              %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
              %p = arith.mulf %a, %b : f32
              %s = arith.addf %acc, %p : f32
              scf.yield %s : f32
            }
            %n = arith.index_cast %c4 : index to i64
            %nf = arith.sitofp %n : i64 to f32
            %root = math.sqrt %nf : f32
            %score = arith.divf %dot, %root : f32
            %shifted = arith.subf %score, %max : f32
            %w = math.exp %shifted : f32
            %weight = arith.divf %w, %sum : f32
            %x = "cir.load"(%v, %h, %j, %e) : (tensor<2x5x6xf32>, index, index, index) -> f32
            %wx = arith.mulf %weight, %x : f32
            %added = arith.addf %acc_o, %wx : f32
            scf.yield %added : f32
          } else {
            scf.yield %acc_o : f32
          }
          scf.yield %next : f32
        }
        "cir.store"(%o, %out, %h, %i, %e) : (f32, tensor<2x3x6xf32>, index, index, index) -> ()
      }
    }
  }
  return
}

// -----

// The sum loop spells its condition `j < i + 3`, the others `j <= i + 2`: the loops
// must be the same computation, so the body is left as written.
// CHECK-LABEL: func.func @causal_mismatch(
// CHECK: "cir.compute"
// CHECK-NOT: cir.attention
// CHECK: func.func private @causal_mismatch_body
func.func @causal_mismatch(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>) -> tensor<2x3x6xf32> {
  %o = "cir.compute"(%q, %k, %v, %mask) {kind = "attention", body = @causal_mismatch_body, names = ["Q", "K", "V", "mask"],
      operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<3x5xi1>) -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}
func.func private @causal_mismatch_body(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>, %out: tensor<2x3x6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0.0 : f32
  %inf = arith.constant 0x7F800000 : f32
  %ninf = arith.negf %inf : f32
  scf.for %h = %c0 to %c2 step %c1 {
    scf.for %i = %c0 to %c3 step %c1 {
      %max = scf.for %j = %c0 to %c5 step %c1 iter_args(%m = %ninf) -> (f32) {
        %limit = arith.addi %i, %c2 : index
        %causal = arith.cmpi sle, %j, %limit : index
        %bit = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
        %allowed = arith.andi %causal, %bit : i1
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %bigger = arith.maximumf %m, %score : f32
          scf.yield %bigger : f32
        } else {
          scf.yield %m : f32
        }
        scf.yield %next : f32
      }
      %sum = scf.for %j = %c0 to %c5 step %c1 iter_args(%l = %zero) -> (f32) {
        %limit = arith.addi %i, %c3 : index
        %causal = arith.cmpi slt, %j, %limit : index
        %bit = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
        %allowed = arith.andi %causal, %bit : i1
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %shifted = arith.subf %score, %max : f32
          %e = math.exp %shifted : f32
          %added = arith.addf %l, %e : f32
          scf.yield %added : f32
        } else {
          scf.yield %l : f32
        }
        scf.yield %next : f32
      }
      scf.for %e = %c0 to %c6 step %c1 {
        %o = scf.for %j = %c0 to %c5 step %c1 iter_args(%acc_o = %zero) -> (f32) {
          %limit = arith.addi %i, %c2 : index
          %causal = arith.cmpi sle, %j, %limit : index
          %bit = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
          %allowed = arith.andi %causal, %bit : i1
          %next = scf.if %allowed -> (f32) {
            %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
              %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
              %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
              %p = arith.mulf %a, %b : f32
              %s = arith.addf %acc, %p : f32
              scf.yield %s : f32
            }
            %n = arith.index_cast %c4 : index to i64
            %nf = arith.sitofp %n : i64 to f32
            %root = math.sqrt %nf : f32
            %score = arith.divf %dot, %root : f32
            %shifted = arith.subf %score, %max : f32
            %w = math.exp %shifted : f32
            %weight = arith.divf %w, %sum : f32
            %x = "cir.load"(%v, %h, %j, %e) : (tensor<2x5x6xf32>, index, index, index) -> f32
            %wx = arith.mulf %weight, %x : f32
            %added = arith.addf %acc_o, %wx : f32
            scf.yield %added : f32
          } else {
            scf.yield %acc_o : f32
          }
          scf.yield %next : f32
        }
        "cir.store"(%o, %out, %h, %i, %e) : (f32, tensor<2x3x6xf32>, index, index, index) -> ()
      }
    }
  }
  return
}

// -----

// CHECK-LABEL: func.func @not_attention(
// CHECK: "cir.compute"
// CHECK-NOT: cir.attention
// CHECK: func.func private @not_attention_body
func.func @not_attention(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>) -> tensor<2x3x6xf32> {
  %o = "cir.compute"(%q, %k, %v, %mask) {kind = "attention", body = @not_attention_body, names = ["Q", "K", "V", "mask"],
      operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<3x5xi1>) -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}
func.func private @not_attention_body(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<3x5xi1>, %out: tensor<2x3x6xf32>) attributes {cir.body} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0.0 : f32
  %inf = arith.constant 0x7F800000 : f32
  %ninf = arith.negf %inf : f32
  scf.for %h = %c0 to %c2 step %c1 {
    scf.for %i = %c0 to %c3 step %c1 {
      %max = scf.for %j = %c0 to %c5 step %c1 iter_args(%m = %ninf) -> (f32) {
        %allowed = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %bigger = arith.maximumf %m, %score : f32
          scf.yield %bigger : f32
        } else {
          scf.yield %m : f32
        }
        scf.yield %next : f32
      }
      %sum = scf.for %j = %c0 to %c5 step %c1 iter_args(%l = %zero) -> (f32) {
        %allowed = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
        %next = scf.if %allowed -> (f32) {
          %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
            %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
            %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %acc, %p : f32
            scf.yield %s : f32
          }
          %n = arith.index_cast %c4 : index to i64
          %nf = arith.sitofp %n : i64 to f32
          %root = math.sqrt %nf : f32
          %score = arith.divf %dot, %root : f32
          %twice = arith.addf %score, %score : f32
          %shifted = arith.subf %twice, %max : f32
          %e = math.exp %shifted : f32
          %added = arith.addf %l, %e : f32
          scf.yield %added : f32
        } else {
          scf.yield %l : f32
        }
        scf.yield %next : f32
      }
      scf.for %e = %c0 to %c6 step %c1 {
        %o = scf.for %j = %c0 to %c5 step %c1 iter_args(%acc_o = %zero) -> (f32) {
          %allowed = "cir.load"(%mask, %i, %j) : (tensor<3x5xi1>, index, index) -> i1
          %next = scf.if %allowed -> (f32) {
            %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
              %a = "cir.load"(%q, %h, %i, %d) : (tensor<2x3x4xf32>, index, index, index) -> f32
              %b = "cir.load"(%k, %h, %j, %d) : (tensor<2x5x4xf32>, index, index, index) -> f32
              %p = arith.mulf %a, %b : f32
              %s = arith.addf %acc, %p : f32
              scf.yield %s : f32
            }
            %n = arith.index_cast %c4 : index to i64
            %nf = arith.sitofp %n : i64 to f32
            %root = math.sqrt %nf : f32
            %score = arith.divf %dot, %root : f32
            %shifted = arith.subf %score, %max : f32
            %w = math.exp %shifted : f32
            %weight = arith.divf %w, %sum : f32
            %x = "cir.load"(%v, %h, %j, %e) : (tensor<2x5x6xf32>, index, index, index) -> f32
            %wx = arith.mulf %weight, %x : f32
            %added = arith.addf %acc_o, %wx : f32
            scf.yield %added : f32
          } else {
            scf.yield %acc_o : f32
          }
          scf.yield %next : f32
        }
        "cir.store"(%o, %out, %h, %i, %e) : (f32, tensor<2x3x6xf32>, index, index, index) -> ()
      }
    }
  }
  return
}

