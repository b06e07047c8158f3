#!/usr/bin/env bash
# Uses minivit as an outsider would, from what `cmake --install` (or the .debs) put in a
# prefix, and compares every answer with the `minivit predict` of the same prefix:
#   c       examples/c_predict built through find_package(minivit), through pkg-config
#           against libminivit.so, and against libminivit.a
#   python  python/minivit.py with numpy: predict (pixels and floats) and attention, against
#           `minivit predict --json` and `minivit attention`'s .npy files
#   deb     `cpack -G DEB`: the program, the library, its -dev files and the Python wrapper
#           each in its own package, with the dependencies between them; all four unpacked
#           with dpkg-deb -x into one tree, where the packaged `minivit --version`, `predict`,
#           the C example built through pkg-config and the Python wrapper are checked
# usage: check_installed.sh MODE BUILD_DIR SOURCE_DIR WORKDIR
set -euo pipefail
mode=$1
build=$2
src=$3
work=$4
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL ($mode): $*" >&2
  exit 1
}

prefix=$work/prefix
if [[ $mode == deb ]]; then
  (cd "$build" && cpack -G DEB -B "$work/packages" > "$work/cpack.txt") || fail "cpack: $(cat "$work/cpack.txt")"
  package_files() {  # $1: package name; its files, one a line, without the leading ./
    dpkg-deb -c "$work/packages/$1"_0.2.0_*.deb | awk '$1 !~ /^d/ {print substr($6, 3)}'
  }
  field() {  # $1: package name, $2: control field
    dpkg-deb -f "$work/packages/$1"_0.2.0_*.deb "$2"
  }
  expect_files() {  # $1: package name, then exactly the files it must hold
    local name=$1
    shift
    diff <(printf '%s\n' "$@" | sort) <(package_files "$name" | sort) > "$work/files.txt" ||
      fail "$name holds other files than expected: $(cat "$work/files.txt")"
  }
  expect_files minivit usr/bin/minivit
  expect_files libminivit0 usr/lib/libminivit.so.0 usr/lib/libminivit.so.0.2.0
  expect_files libminivit-dev usr/include/minivit.h usr/lib/libminivit.so usr/lib/libminivit.a \
    usr/lib/cmake/minivit/minivitConfig.cmake usr/lib/cmake/minivit/minivitConfigVersion.cmake \
    usr/lib/cmake/minivit/minivitTargets.cmake usr/lib/cmake/minivit/minivitTargets-release.cmake \
    usr/lib/pkgconfig/minivit.pc
  expect_files python3-minivit usr/share/minivit/python/minivit.py
  for name in minivit libminivit0; do
    field "$name" Depends | grep -q "libopenblas0" || fail "no libopenblas0 in $name's Depends: $(field "$name" Depends)"
  done
  for name in libminivit-dev python3-minivit; do
    field "$name" Depends | grep -q "libminivit0 (= 0.2.0)" || fail "$name does not depend on libminivit0 (= 0.2.0)"
  done
  field python3-minivit Depends | grep -q "python3-numpy" || fail "python3-minivit does not depend on python3-numpy"
  [[ $(field python3-minivit Architecture) == all ]] || fail "python3-minivit is not Architecture: all"
  for deb in "$work"/packages/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
  done
  prefix=$work/root/usr
  "$prefix/bin/minivit" --version | grep -q "0.2.0" || fail "the packaged minivit --version"
else
  cmake --install "$build" --prefix "$prefix" > /dev/null
fi
minivit=$prefix/bin/minivit

# A tiny trained model and six of its test images as PNG files.
source "$src/tests/tiny_model.sh"
tiny_model "$work" 4
"$minivit" train --config "$work/tiny.toml" > /dev/null 2>&1 || fail "the installed minivit could not train"
"$minivit" export --config "$work/tiny.toml" --split test --out "$work/png" > /dev/null 2>&1
mapfile -t images < <(find "$work/png" -name '*.png' | sort | head -n 6)
((${#images[@]} == 6)) || fail "export wrote fewer than 6 images"
ckpt=$work/run/last.safetensors
"$minivit" predict --checkpoint "$ckpt" --topk 3 --json "$work/predict.json" "${images[@]}" |
  grep -v '^$' > "$work/predict.txt"

same_as_cli() {  # $1: a program's output file
  diff "$work/predict.txt" "$1" > "$work/diff.txt" || fail "$1 differs from minivit predict: $(cat "$work/diff.txt")"
}

case $mode in
  c | deb)
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    example=$src/examples/c_predict
    if [[ $mode == c ]]; then
      cmake -S "$example" -B "$work/example-build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.txt" ||
        fail "configuring the example: $(cat "$work/cmake.txt")"
      cmake --build "$work/example-build" > "$work/build.txt" || fail "building the example: $(cat "$work/build.txt")"
      "$work/example-build/c_predict" "$ckpt" "${images[@]}" > "$work/find_package.txt"
      same_as_cli "$work/find_package.txt"
      # The static library: every dependency from pkg-config's private list.
      static_libs=$(pkg-config --static --libs minivit | sed 's/-lminivit\b/-l:libminivit.a/')
      cc -o "$work/c_predict_static" "$example/c_predict.c" $(pkg-config --cflags minivit stb) \
        $static_libs $(pkg-config --libs stb) || fail "linking the example with libminivit.a"
      ! ldd "$work/c_predict_static" | grep -q libminivit || fail "the static build links libminivit.so"
      "$work/c_predict_static" "$ckpt" "${images[@]}" > "$work/static.txt"
      same_as_cli "$work/static.txt"
    fi
    cc -o "$work/c_predict_pc" "$example/c_predict.c" $(pkg-config --cflags --libs minivit stb) \
      -Wl,-rpath,"$prefix/lib" || fail "building the example through pkg-config"
    "$work/c_predict_pc" "$ckpt" "${images[@]}" > "$work/pkg_config.txt"
    same_as_cli "$work/pkg_config.txt"
    # A bad checkpoint: the library's message, not a crash.
    if "$work/c_predict_pc" "$work/tiny.toml" "${images[0]}" 2> "$work/bad.txt"; then
      fail "a config file loaded as a checkpoint"
    fi
    grep -q "tiny.toml" "$work/bad.txt" || fail "no message naming the file: $(cat "$work/bad.txt")"
    ;;&  # deb goes on to the Python wrapper
  python | deb)
    "$minivit" attention --checkpoint "$ckpt" --image "${images[0]}" --out "$work/attention" > /dev/null
    # Debian's Python, where python3-numpy installs.
    /usr/bin/python3 - "$prefix/share/minivit/python" "$ckpt" "$work" "${images[@]}" << 'PY'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import minivit
ckpt, work, images = sys.argv[2], sys.argv[3], sys.argv[4:]
cli = json.load(open(work + "/predict.json"))["predictions"]
model = minivit.Model(ckpt)
assert minivit.library_version() == "0.2.0"
assert (model.image_size, model.channels, model.classes) == (16, 1, 4)
# The first image as the attention command normalised it (its input.npy), as floats.
seen = np.load(work + "/attention/input.npy")
probs = model.predict(seen[None])
top = cli[0]["top"]
for entry in top:
    assert abs(probs[0][entry["index"]] - entry["probability"]) <= 1e-6, (entry, probs[0])
assert model.class_names[int(probs[0].argmax())] == top[0]["class"]
# Every image as 8-bit pixels, normalised by the library.
import struct, zlib
def read_png_grey(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour == 0, "expected 8-bit grey PNGs"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    rows, prev, stride = [], bytearray(width), width + 1
    for r in range(height):
        f, line = raw[r * stride], bytearray(raw[r * stride + 1:(r + 1) * stride])
        for x in range(width):
            a = line[x - 1] if x else 0
            b, c = prev[x], (prev[x - 1] if x else 0)
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(height, width)
pixels = np.stack([read_png_grey(p) for p in images])
all_probs = model.predict(pixels)
for p, entry in zip(all_probs, cli):
    for t in entry["top"]:
        assert abs(p[t["index"]] - t["probability"]) <= 1e-6, (entry["image"], t, p)
# Attention of the first image against the CLI's files.
a = model.attention(seen)
for name, got in (("attention", a.attention), ("rollout", a.rollout),
                  ("grad_rollout", a.grad_rollout)):
    want = np.load(work + "/attention/" + name + ".npy")
    assert want.shape == got.shape and np.array_equal(want, got), (name, np.abs(want - got).max())
assert a.explained == top[0]["index"]
# The head's pool weights: learned per image (seq, as the CLI's pool_weights.npy), else fixed.
if model.pool == "seq":
    want = np.load(work + "/attention/pool_weights.npy").reshape(-1)
elif model.pool == "mean":
    want = np.full(model.tokens, 1 / model.tokens, dtype=np.float32)
else:
    want = np.eye(1, model.tokens, dtype=np.float32)[0]
assert a.pool_weights.shape == (model.tokens,) and np.array_equal(a.pool_weights, want), a.pool_weights
# From bytes, and a bad one.
assert np.array_equal(minivit.Model(open(ckpt, "rb").read()).predict(pixels), all_probs)
try:
    minivit.Model(b"not a checkpoint")
    raise AssertionError("junk bytes loaded")
except minivit.Error as e:
    assert "checkpoint in memory" in str(e), e
print("python: predict on %d images and one image's attention match the CLI" % len(images))
PY
    ;;
  c) ;;
  *) fail "unknown mode" ;;
esac
echo "$mode: the installed minivit gives the answers of minivit predict"
