"""DeviceArray's reshape (a view) and copy_from (host values into device memory), on
the GPU."""
import numpy as np
import pytest


@pytest.mark.gpu
def test_cuda_reshape_is_a_view_and_copy_from_overwrites(rng):
    from zynml.runtime.cuda.device_array import DeviceArray
    host = rng.standard_normal((7, 13)).astype(np.float32)
    a = DeviceArray.from_numpy(host)
    flat = a.reshape(-1)
    assert flat.shape == (91,) and flat.ptr == a.ptr
    np.testing.assert_array_equal(flat.numpy(), host.reshape(-1))
    np.testing.assert_array_equal(a.reshape(13, 7).numpy(), host.reshape(13, 7))
    new = rng.standard_normal(91).astype(np.float32)
    flat.copy_from(new)
    np.testing.assert_array_equal(a.numpy(), new.reshape(7, 13))
    with pytest.raises(ValueError, match="cannot reshape"):
        a.reshape(5, -1)
    with pytest.raises(ValueError, match="copy_from: shape"):
        a.copy_from(new)
