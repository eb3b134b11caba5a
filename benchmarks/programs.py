"""ZynML programs that more than one benchmark runs (each imports them by name)."""

# Row softmax as four blocks (two reductions, two maps), as a user would write it first.
SOFTMAX = """
pipeline softmax(x: tensor[rows, cols]) -> tensor[rows, cols]:
    let row_max = compute(x) {
        @kernel reduce(max, axis=1)
        for i in 0..rows, j in 0..cols:
            yield x[i, j]
    }
    let shifted_exp = compute(x, row_max) {
        @kernel elementwise
        for i in 0..rows, j in 0..cols:
            out[i, j] = exp(x[i, j] - row_max[i])
    }
    let row_sum = compute(shifted_exp) {
        @kernel reduce(+, axis=1)
        for i in 0..rows, j in 0..cols:
            yield shifted_exp[i, j]
    }
    let probs = compute(shifted_exp, row_sum) {
        @kernel elementwise
        for i in 0..rows, j in 0..cols:
            out[i, j] = shifted_exp[i, j] / row_sum[i]
    }
    return probs
"""
