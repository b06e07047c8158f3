"""minivit from Python: a ctypes wrapper over libminivit.so's C API (include/minivit.h), with
numpy arrays in and out. Nothing to compile.

    import minivit
    model = minivit.Model("runs/fashion_mnist/last.safetensors")
    probs = model.predict(pixels)            # (n, 28, 28, 1) uint8 or (n, 1, 28, 28) float32
    print(model.class_names[probs[0].argmax()])
    maps = model.attention(image)            # .attention (L, H, T, T), .rollout, .grad_rollout,
                                             # .pool_weights (T)

The library is found as MINIVIT_LIBRARY names it, else beside this file's prefix
(PREFIX/lib/libminivit.so.0 for PREFIX/share/minivit/python/minivit.py, or build/ in a
source tree), else by the system's search (ctypes.util.find_library). Errors raise
minivit.Error with the library's message.
"""
import ctypes
import ctypes.util
import os
from dataclasses import dataclass

import numpy as np

__all__ = ["Error", "Model", "Attention", "library_version"]


class Error(RuntimeError):
    """A call of the C API that did not return MINIVIT_OK; the message is the library's."""


class _Description(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in
                ("image_size", "channels", "classes", "patch_size", "grid", "tokens", "layers",
                 "heads", "dim")] + [
        ("pool", ctypes.c_char_p), ("attention", ctypes.c_char_p),
        ("patch_embed", ctypes.c_char_p), ("mean", ctypes.POINTER(ctypes.c_float)),
        ("std", ctypes.POINTER(ctypes.c_float))]


def _candidates():
    if os.environ.get("MINIVIT_LIBRARY"):
        yield os.environ["MINIVIT_LIBRARY"]
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for relative in ("../../../lib/libminivit.so.0", "../build/libminivit.so.0"):
        yield os.path.normpath(os.path.join(here, relative))
    found = ctypes.util.find_library("minivit")
    if found:
        yield found


def _load_library():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        lib = ctypes.CDLL(path)
        break
    else:
        raise Error("libminivit.so not found (tried %s); set MINIVIT_LIBRARY to its path"
                    % (", ".join(tried) or "the system's library path"))
    model_p, status, f32p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)
    signatures = {
        "minivit_version": (ctypes.c_char_p, []),
        "minivit_create": (model_p, []),
        "minivit_free": (None, [model_p]),
        "minivit_last_error": (ctypes.c_char_p, [model_p]),
        "minivit_load_file": (status, [model_p, ctypes.c_char_p]),
        "minivit_load_memory": (status, [model_p, ctypes.c_void_p, ctypes.c_size_t]),
        "minivit_describe": (status, [model_p, ctypes.POINTER(_Description)]),
        "minivit_class_name": (status, [model_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]),
        "minivit_set_threads": (status, [model_p, ctypes.c_int]),
        "minivit_predict": (status, [model_p, f32p, ctypes.c_int, f32p]),
        "minivit_predict_pixels": (status, [model_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_int,
                                            f32p]),
        "minivit_attention": (status, [model_p, f32p, f32p, f32p]),
        "minivit_gradient_rollout": (status, [model_p, f32p, ctypes.c_int, f32p,
                                              ctypes.POINTER(ctypes.c_int)]),
        "minivit_pool_weights": (status, [model_p, f32p, f32p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


_lib = None


def _library():
    global _lib
    if _lib is None:
        _lib = _load_library()
    return _lib


def library_version():
    """The loaded library's version, "0.2.0"."""
    return _library().minivit_version().decode()


def _floats(array):
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


@dataclass
class Attention:
    """One image's attention: every layer and head (L, H, T, T), the attention rollout and
    the gradient rollout of `explained` (both (grid, grid)), its class probabilities, and
    each token's share of what the head reads (T), learned per image where pool is "seq"."""
    attention: np.ndarray
    rollout: np.ndarray
    grad_rollout: np.ndarray
    explained: int
    probs: np.ndarray
    pool_weights: np.ndarray = None


class Model:
    """A checkpoint that `minivit train` wrote, loaded from a path or from bytes."""

    def __init__(self, checkpoint, threads=0):
        lib = _library()
        self._lib = lib
        self._handle = lib.minivit_create()
        if not self._handle:
            raise MemoryError("minivit_create")
        if isinstance(checkpoint, (bytes, bytearray, memoryview)):
            data = bytes(checkpoint)
            self._check(lib.minivit_load_memory(self._handle, data, len(data)))
        else:
            self._check(lib.minivit_load_file(self._handle, os.fsencode(checkpoint)))
        d = _Description()
        self._check(lib.minivit_describe(self._handle, ctypes.byref(d)))
        self.image_size, self.channels, self.classes = d.image_size, d.channels, d.classes
        self.grid, self.tokens, self.layers, self.heads = d.grid, d.tokens, d.layers, d.heads
        self.pool, self.attention_form = d.pool.decode(), d.attention.decode()
        self.patch_embed = d.patch_embed.decode()
        self.mean = np.array(d.mean[:d.channels], dtype=np.float32)
        self.std = np.array(d.std[:d.channels], dtype=np.float32)
        names = []
        for k in range(self.classes):
            name = ctypes.c_char_p()
            self._check(lib.minivit_class_name(self._handle, k, ctypes.byref(name)))
            names.append(name.value.decode("utf-8", "replace"))
        self.class_names = names
        self.threads = threads

    @property
    def threads(self):
        return self._threads

    @threads.setter
    def threads(self, threads):
        self._check(self._lib.minivit_set_threads(self._handle, int(threads)))
        self._threads = int(threads)

    def _check(self, status):
        if status != 0:
            raise Error(self._lib.minivit_last_error(self._handle).decode("utf-8", "replace"))

    def _images(self, images):
        """Float images as (n, C, S, S) float32, contiguous."""
        x = np.ascontiguousarray(images, dtype=np.float32)
        shape = (self.channels, self.image_size, self.image_size)
        if x.shape == shape:
            x = x[None]
        if x.ndim != 4 or x.shape[1:] != shape:
            raise Error("expected images of shape (n, %d, %d, %d), got %s" % (shape + (x.shape,)))
        return x

    def predict(self, images):
        """Class probabilities (n, classes) of n images: uint8 pixels (n, S, S, C) (or (n, S, S)
        for grey), normalised here as in training; or float32 (n, C, S, S) already
        normalised."""
        images = np.asarray(images)
        if images.dtype == np.uint8:
            x = np.ascontiguousarray(images)
            if self.channels == 1 and x.ndim == 3:
                x = x[..., None]
            if x.ndim == 3:
                x = x[None]
            shape = (self.image_size, self.image_size, self.channels)
            if x.ndim != 4 or x.shape[1:] != shape:
                raise Error("expected pixels of shape (n, %d, %d, %d), got %s"
                            % (shape + (images.shape,)))
            probs = np.empty((x.shape[0], self.classes), dtype=np.float32)
            self._check(self._lib.minivit_predict_pixels(
                self._handle, x.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), x.shape[0],
                _floats(probs)))
            return probs
        x = self._images(images)
        probs = np.empty((x.shape[0], self.classes), dtype=np.float32)
        self._check(self._lib.minivit_predict(self._handle, _floats(x), x.shape[0],
                                              _floats(probs)))
        return probs

    def normalise(self, pixels):
        """uint8 pixels (S, S, C) or (S, S) as the float (C, S, S) image training saw."""
        x = np.asarray(pixels, dtype=np.uint8)
        if x.ndim == 2:
            x = x[..., None]
        x = x.transpose(2, 0, 1).astype(np.float32) / np.float32(255)
        return (x - self.mean[:, None, None]) / self.std[:, None, None]

    def attention(self, image, class_index=-1):
        """One image, float (C, S, S) normalised or uint8 (S, S, C): its attention, rollout,
        the gradient rollout of class_index (-1: the predicted class) and the head's pool
        weights."""
        image = np.asarray(image)
        if image.dtype == np.uint8:
            image = self.normalise(image)
        x = self._images(image)[0]
        att = np.empty((self.layers, self.heads, self.tokens, self.tokens), dtype=np.float32)
        rollout = np.empty((self.grid, self.grid), dtype=np.float32)
        grad = np.empty_like(rollout)
        explained = ctypes.c_int(-1)
        self._check(self._lib.minivit_attention(self._handle, _floats(x), _floats(att),
                                                _floats(rollout)))
        self._check(self._lib.minivit_gradient_rollout(self._handle, _floats(x), int(class_index),
                                                       _floats(grad), ctypes.byref(explained)))
        pool_weights = np.empty(self.tokens, dtype=np.float32)
        self._check(self._lib.minivit_pool_weights(self._handle, _floats(x), _floats(pool_weights)))
        return Attention(att, rollout, grad, explained.value, self.predict(x[None])[0],
                         pool_weights)

    def close(self):
        if getattr(self, "_handle", None):
            self._lib.minivit_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
