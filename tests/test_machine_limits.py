"""The Python API never raises anything but a ZynMLError for a user's mistake: sizes
beyond the machine or beyond 64 bits, runtime allocation failures, the memory API
without CUDA, inputs named like zynml.run's options; and notes point at the user's line.
Found by a hostile-user campaign; each test names the defect it pins down."""
import warnings
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml import machine_limits as limits
from zynml.devices import DeviceError
from zynml.errors import ZynMLError, ZynMLNote
from zynml.memory import AllocationError, HostArray
from zynml.runtime.iree_runner import _invoke_failure



def _cuda_here() -> bool:
    from zynml.runtime.cuda.driver import CudaError, get_device
    try:
        get_device(0)
    except CudaError:
        return False
    return True


HAS_CUDA = _cuda_here()

SCALE = """let y = compute(x, s) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * s
}
"""
SIZED = """let y = compute(x, n) {
    @kernel elementwise
    for i in 0..n:
        out[i] = 2.0
}
"""
OUTER = """let y = compute(a, b) {
    @kernel elementwise
    for i in 0..n, j in 0..m:
        out[i, j] = a[i] * b[j]
}
"""
CUBE = """let y = compute(x) {
    @kernel elementwise
    for i in 0..a, j in 0..b, k in 0..c:
        out[i, j, k] = x[i, j, k] * 2.0
}
"""
GIB16 = 16 * 2 ** 30


def one(source: str, name: str) -> str:
    return f"let y = compute({name}) {{\n    @kernel elementwise\n    for i in 0..n:\n" \
           f"        out[i] = {name}[i] * 2.0\n}}\n"


@pytest.fixture
def sixteen_gib(monkeypatch):
    """A machine of 16 GiB, whatever this one has: the messages are exact."""
    monkeypatch.setattr(limits, "host_memory", lambda: GIB16)


def test_an_integer_beyond_64_bits_is_a_located_error_not_an_overflow_error():
    ones = np.ones(3, np.float32)
    with pytest.raises(ZynMLError) as err:
        zynml.run(SCALE, x=ones, s=2 ** 70, device="cpu")
    assert str(err.value) == (
        "<string>:1:20: error: input 's' is 1180591620717411303424, which does not fit in "
        "a 64-bit integer (i64 holds -2**63 to 2**63 - 1)\n"
        "let y = compute(x, s) {\n" + " " * 19 + "^")
    with pytest.raises(ZynMLError, match="input 'n' is 18446744073709551616, which does"):
        zynml.run(SIZED, x=ones, n=2 ** 64, device="cpu")
    with pytest.raises(ZynMLError, match="input 'n' is an integer of 16610 bits"):
        zynml.run(SIZED, x=ones, n=10 ** 5000, device="cpu")  # no str() of 5000 digits


def test_a_broadcast_view_larger_than_memory_is_a_located_error(sixteen_gib):
    x = np.broadcast_to(np.float32(1), (2 ** 16, 2 ** 16, 2 ** 3))  # 128 GiB, 4 bytes held
    with pytest.raises(ZynMLError) as err:
        zynml.run(CUBE, x=x, device="cpu")
    assert str(err.value).splitlines()[0] == (
        "<string>:1:17: error: input 'x' (shape 65536x65536x8, float32) needs 128.0 GiB, "
        "more than this machine's memory (16.0 GiB)")


def test_an_output_larger_than_memory_is_refused_before_compiling(sixteen_gib, monkeypatch):
    from zynml import compiler
    monkeypatch.setattr(compiler, "build", lambda *a, **k: pytest.fail("compiled"))
    big = np.ones(100000, np.float32)
    with pytest.raises(ZynMLError) as err:
        zynml.run(OUTER, a=big, b=big, device="cpu")
    assert str(err.value).splitlines()[0] == (
        "<string>:1:1: error: output 'y' (shape 100000x100000, float32) needs 37.3 GiB, "
        "more than this machine's memory (16.0 GiB)")


def test_a_size_that_cannot_be_allocated_is_a_zynml_error_not_an_iree_exception():
    """n is known only at run time here (the output is tensor<?xf32>): IREE's allocator
    refuses 2**64 bytes with OUT_OF_RANGE, which the runtime reports as a ZynMLError."""
    with pytest.raises(ZynMLError) as err:
        zynml.run(SIZED, x=np.ones(3, np.float32), n=2 ** 62, device="cpu")
    assert str(err.value) == ("error: running 'main' failed: a size is negative or too "
                              "large to allocate (IREE: OUT_OF_RANGE; packed byte count "
                              "overflows device size)")


def test_iree_out_of_memory_reads_as_out_of_memory():
    text = ("Error invoking function: c/runtime/src/iree/base/allocator_libc.c:57: "
            "RESOURCE_EXHAUSTED; libc allocator failed the request; while invoking native "
            "function hal.device.queue.alloca; while calling import; \n[ 0] bytecode "
            "module@1:330 -")
    assert _invoke_failure("main", text) == (
        "running 'main' failed: out of memory: an array of the program is too large for "
        "this machine (IREE: RESOURCE_EXHAUSTED; libc allocator failed the request)")


# ------------------------------------------------------------------ input names


@pytest.mark.parametrize("name", ["source", "inputs", "device", "backend", "self"])
def test_inputs_named_like_the_options_work_through_the_dict(name):
    x = np.arange(3, dtype=np.float32)
    out = zynml.run(one(SCALE, name), {name: x}, device="cpu")
    np.testing.assert_array_equal(out["y"], 2 * x)
    prog = zynml.compile(one(SCALE, name), device="cpu")
    np.testing.assert_array_equal(prog({name: x})["y"], 2 * x)
    np.testing.assert_array_equal(prog(**{name: x})["y"], 2 * x)


@pytest.mark.parametrize("name", ["source", "inputs"])
def test_inputs_named_source_or_inputs_work_as_keywords(name):
    x = np.arange(3, dtype=np.float32)
    out = zynml.run(one(SCALE, name), device="cpu", **{name: x})
    np.testing.assert_array_equal(out["y"], 2 * x)


def test_an_array_given_as_device_says_how_to_pass_an_input_called_device():
    with pytest.raises(ZynMLError) as err:
        zynml.run(one(SCALE, "device"), device=np.ones(3, np.float32))
    assert str(err.value) == (
        "error: zynml.run's device= takes a name such as 'cpu', not ndarray; an input "
        "called 'device' goes in the inputs dict: zynml.run(..., {'device': value})")
    with pytest.raises(ZynMLError) as err:
        zynml.run(one(SCALE, "device"), device="cpu")
    assert str(err.value).splitlines()[0] == (
        "<string>:1:17: error: missing input 'device'; zynml.run's device= is an option, "
        "not this input: pass the inputs as a dict, zynml.run(source, {'device': ...})")


def test_an_input_given_twice_or_a_dict_that_is_not_one_is_an_error():
    x = np.ones(3, np.float32)
    with pytest.raises(ZynMLError, match="input 'x' is given twice, in the dict and as a "
                                         "keyword"):
        zynml.run(one(SCALE, "x"), {"x": x}, x=x, device="cpu")
    with pytest.raises(ZynMLError, match="the inputs are a dict of input name -> value, "
                                         "not list"):
        zynml.run(one(SCALE, "x"), [x], device="cpu")


# ------------------------------------------------------------------ memory API


@pytest.mark.skipif(HAS_CUDA, reason="the fallback is for machines without CUDA")
def test_pinned_memory_without_cuda_is_host_memory_with_a_note():
    with pytest.warns(ZynMLNote, match=r"^note: pinned=True: cannot use 'cuda:0': .*; "
                                       "allocating ordinary host memory$"):
        a = zynml.allocate((4, 3), "float32", pinned=True)
    assert isinstance(a, HostArray) and a.shape == (4, 3) and not a.any()


@pytest.mark.skipif(HAS_CUDA, reason="needs a machine without CUDA")
@pytest.mark.parametrize("call", [
    lambda: zynml.allocate((2,), device="cuda:0"),
    lambda: zynml.allocate((2,)).to_device("cuda:0"),
    lambda: zynml.memory_pool("cuda:0", 1024),
])
def test_cuda_memory_without_cuda_is_a_device_error(call):
    with pytest.raises(DeviceError, match=r"^error: cannot use 'cuda:0': ") as err:
        call()
    assert isinstance(err.value, ZynMLError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("call,message", [
    (lambda: zynml.allocate((2 ** 40, 2 ** 40)), "error: the allocation (shape "
     "1099511627776x1099511627776, float32) needs 4194304.0 EiB, more than this machine's "
     "memory (16.0 GiB)"),
    (lambda: zynml.allocate((4,), "bogus"), "error: not a dtype: 'bogus' (data type "
     "'bogus' not understood)"),
    (lambda: zynml.allocate(None), "error: a shape is a sequence of non-negative "
     "integers, not None"),
    (lambda: zynml.memory_pool("cpu", 2 ** 60), "error: the allocation (shape "
     "1152921504606846976, uint8) needs 1.0 EiB, more than this machine's memory "
     "(16.0 GiB)"),
])
def test_memory_api_mistakes_are_allocation_errors(sixteen_gib, call, message):
    with pytest.raises(AllocationError) as err:
        call()
    assert str(err.value) == message


# ------------------------------------------------------------------ notes


def test_a_note_points_at_the_users_line_not_at_zynml():
    """Python shows a warning with the line it is attributed to: the caller's, not a
    line of zynml/compiler.py."""
    source = (Path(__file__).resolve().parent / "programs" / "matmul_times_2.zyn").read_text()
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        zynml.compile(source, device="cpu").emit("linalg", {"A": a, "B": b})
    notes = [w for w in caught if issubclass(w.category, ZynMLNote)]
    assert [str(w.message) for w in notes] == [
        "<string>:1:9: note: the body of this 'matmul' kernel is not a plain matrix "
        "product; it is lowered generically from the body"]
    assert notes[0].filename == __file__


# ------------------------------------------------------------------ reads out of bounds


@pytest.mark.parametrize("body,shape,message,col", [
    # a constant index: linalg's verifier said "'linalg.generic' op inferred input/output
    # operand #1 has shape's dimension #0 to be greater than or equal to 8", at `compute`
    ("    for i in 0..n:\n        out[i] = x[i] + x[7]", (4,),
     "'x' is read out of bounds: index 7 of dimension 0, but that dimension of 'x' has "
     "size 4", 25),
    ("    for i in 0..n:\n        out[i] = x[i] + x[i - 1]", (4,),
     "'x' is read out of bounds: the index of dimension 0 runs from -1 to 2, but that "
     "dimension of 'x' has size 4", 25),
    ("    for i in 0..n, j in 0..m:\n        out[i, j] = x[i, j] + x[i, j + 1]", (5, 3),
     "'x' is read out of bounds: the index of dimension 1 runs from 1 to 3, but that "
     "dimension of 'x' has size 3", 31),
])
def test_a_read_out_of_bounds_is_located_at_the_read(body, shape, message, col):
    source = f"let y = compute(x) {{\n    @kernel elementwise\n{body}\n}}\n"
    with pytest.raises(ZynMLError) as err:
        zynml.run(source, x=np.ones(shape, np.float32), device="cpu")
    lines = str(err.value).splitlines()
    assert lines[0] == f"<string>:4:{col}: error: {message}"
    assert lines[2] == " " * (col - 1) + "^" and "linalg" not in str(err.value)


def test_a_read_inside_the_input_at_an_offset_runs():
    x = np.arange(5, dtype=np.float32)
    out = zynml.run("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..3:\n"
                    "        out[i] = x[i + 2]\n}\n", x=x, device="cpu")["y"]
    np.testing.assert_array_equal(out, x[2:])
