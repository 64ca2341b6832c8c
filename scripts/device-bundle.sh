#!/usr/bin/env bash
# Packs what a GPU machine without MPI, HDF5 or prometheus-cpp needs to run the full Tessel build there:
# the `tessel` binary, its plugins, the kernel and executor test binaries, the shared libraries they load
# (less glibc, libstdc++ and the CUDA libraries, which the GPU machine has) and Open MPI's components, into
# build-bundle/, packed as build-bundle-pack/bundle.tar.xz (both ignored by git; carry the pack). Build here first (scripts/build.sh, or cmake --build build);
# the binaries are x86-64 Debian 12 builds, so the GPU machine needs glibc >= 2.36.
#
# On the GPU machine, from the repository root: scripts/device-check.sh --bundle
# (it links /work/main to the checkout, so the paths compiled into the test binaries resolve, and sets
# LD_LIBRARY_PATH and Open MPI's component path to the bundle).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_BUILD:-$root/build}
out=$root/build-bundle
rm -rf "$out"
mkdir -p "$out/lib" "$out/build/bin" "$out/build/plugins" "$out/data"

copy() {  # copy SRC to DST (same relative path below $out), stripped
  mkdir -p "$(dirname "$2")"
  cp -L "$1" "$2"
  strip --strip-debug "$2" 2>/dev/null || true
}
copy "$build/bin/tessel" "$out/build/bin/tessel"
for p in "$build"/plugins/libtessel_*.so; do copy "$p" "$out/build/plugins/$(basename "$p")"; done
# The example plugin (its CUDA ReLU) for the conformance run of `tessel plugin check` on the GPU.
[ -f "$build/example-plugin/libtessel_example.so" ] &&
  copy "$build/example-plugin/libtessel_example.so" "$out/build/example-plugin/libtessel_example.so"
bins=("$out/build/bin/tessel")
for t in plugins/nn/nn_kernels_test plugins/rgnn/rgnn_kernels_test plugins/common/plugin_common_test \
         plugins/llm/llm_kernels_test plugins/gather/gather_kernels_test \
         workers/rgnn/workers_rgnn_test workers/plugin_host/plugin_host_test workers/llm/spill_pool_test \
         workers/llm/workers_llm_test storage/spill_store_test; do
  [ -x "$build/tests/unit/$t" ] || continue
  copy "$build/tests/unit/$t" "$out/build/tests/unit/$t"
  bins+=("$out/build/tests/unit/$t")
done
# The plugin-host tests' own plugins, and the kernel micro-benchmarks.
[ -d "$build/tests/unit/workers/plugin_host/test_plugins" ] &&
  cp -r "$build/tests/unit/workers/plugin_host/test_plugins" "$out/build/tests/unit/workers/plugin_host/"
for b in "$build"/bench/*_bench; do
  [ -x "$b" ] && copy "$b" "$out/build/bench/$(basename "$b")" && bins+=("$out/build/bench/$(basename "$b")")
done
# Shared libraries: everything the binaries and plugins load, less what any Linux GPU machine has.
skip='^(linux-vdso|libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|librt\.so|libdl\.so|libresolv|libcuda|libcudart|libcublas|libnccl|libnvidia)'
for f in "${bins[@]}" "$out"/build/plugins/*.so "$out"/build/example-plugin/*.so; do
  ldd "$f" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done
done
ompi=$(dirname "$(ldd "$build/bin/tessel" | awk '/libmpi\.so/ {print $3}')")/openmpi/lib/openmpi3
if [ -d "$ompi" ]; then
  mkdir -p "$out/lib/openmpi3"
  cp -L "$ompi"/*.so "$out/lib/openmpi3/"
  for c in "$out"/lib/openmpi3/*.so; do
    ldd "$c" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      [[ $name =~ $skip ]] && continue
      [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
    done
  done
fi
# The datasets the GPU checks train on (the raw files; tessel imports them there).
data=$(cd "$root/.." && pwd)/shared/data
for d in aifb fb15k-237 tinyshakespeare; do [ -d "$data/$d" ] && cp -r "$data/$d" "$out/data/"; done
# The lent machine takes at most 64 MiB of carried files: travel compressed (OpenBLAS alone is 36 MB).
mkdir -p "$root/build-bundle-pack"
tar -C "$root" -cf - build-bundle | xz -T0 -6 >"$root/build-bundle-pack/bundle.tar.xz"
du -sh "$out" "$root/build-bundle-pack/bundle.tar.xz"
