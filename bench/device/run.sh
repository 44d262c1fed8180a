#!/usr/bin/env bash
# bench:device on the GPU machine (docs/device-bench.md): unpacks the Node binary, Dawn and (as
# root) Debian's Vulkan loader and GL/EGL dispatch libraries carried in this folder, then runs each
# part of the benchmark in its own Node process under its time budget. Results: $OUT (default
# ./out): adapter.json, grads.json, steps.json, kernels.json, precision.json, summary.md, log.txt.
#
#   bash .device/run.sh            there: NVIDIA's Vulkan ICD, PyTorch with CUDA; within 4 minutes
#   bash .device/run.sh --local    here: the software adapter, tiny shapes, no PyTorch
#
# Exit status 0 when every part passed; 1 otherwise (summary.md says which and why).
set -u
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOCAL=""
if [ "${1:-}" = "--local" ]; then LOCAL="--local"; fi
OUT="${OUT:-./out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
exec > >(tee -a "$OUT/log.txt") 2>&1
started=$(date +%s)

# Node and Dawn unpack into a scratch folder beside the small files, so this folder keeps the
# size it travels at.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/shoal-device.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# $1 (a path inside this folder, without .xz) → $2: unpacked with xz, or Python's lzma where xz is missing.
unpack() {
  mkdir -p "$(dirname "$2")"
  if [ -e "$KIT/$1" ]; then cp "$KIT/$1" "$2"; return; fi
  [ -e "$KIT/$1.xz" ] || { echo "missing: $KIT/$1(.xz)"; return 1; }
  if command -v xz >/dev/null 2>&1; then
    xz -dc "$KIT/$1.xz" >"$2"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$KIT/$1.xz" "$2"
  fi
}
NODE="$WORK/bin/node"
DAWN=node_modules/webgpu/dist/linux-x64/dawn.node
unpack bin/node "$NODE" && chmod +x "$NODE" || { echo "bench:device: no Node binary"; exit 1; }
unpack "$DAWN" "$WORK/$DAWN" || { echo "bench:device: no dawn.node"; exit 1; }
cp "$KIT/device.mjs" "$KIT/torch_step.py" "$KIT/moby-dick.txt" "$WORK/"
cp "$KIT/node_modules/webgpu/index.js" "$KIT/node_modules/webgpu/package.json" "$WORK/node_modules/webgpu/"

if [ -z "$LOCAL" ]; then
  # The GPU machine has NVIDIA's driver and ICD but not the Vulkan loader or GL dispatch libraries.
  if [ "$(id -u)" = 0 ] && compgen -G "$KIT/debs/*.deb" >/dev/null; then
    for f in "$KIT"/debs/*.deb; do dpkg -x "$f" /; done
    ldconfig
  elif ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
    echo "bench:device: no libvulkan.so.1, and the carried .debs need root and $KIT/debs"
  fi
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -z "${VK_ICD_FILENAMES:-}" ] && [ -e "$icd" ]; then export VK_ICD_FILENAMES="$icd"; fi
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -e "$icd" ]; then export VK_DRIVER_FILES="$icd"; fi
  egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -e "$egl" ]; then export __EGL_VENDOR_LIBRARY_FILENAMES="$egl"; fi
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
echo "bench:device: node $("$NODE" --version), VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-unset}, OUT=$OUT"

declare -A budget
while read -r part seconds; do budget[$part]=$seconds; done < <("$NODE" "$WORK/device.mjs" budgets $LOCAL)
status=""
failed=0
for part in ${SHOAL_DEVICE_PARTS:-adapter grads steps kernels precision}; do
  echo "== $part (budget ${budget[$part]:-60} s) =="
  # The part stops itself at its budget; timeout is the backstop for a process that hangs outright.
  timeout -k 5 $((${budget[$part]:-60} + 10)) "$NODE" "$WORK/device.mjs" "$part" --out "$OUT" $LOCAL
  rc=$?
  status="$status${status:+,}$part=$rc"
  [ "$rc" -eq 0 ] || failed=1
done
"$NODE" "$WORK/device.mjs" report --out "$OUT" --status "$status" $LOCAL >/dev/null
echo "bench:device: parts $status; $(($(date +%s) - started)) s in all; see $OUT/summary.md"
exit $failed
