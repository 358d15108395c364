#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stand-in for nvidia-smi: fake-nvidia-smi.sh <setup> <nvidia-smi arguments>.
# Setups: 0 (driver loaded, no GPU), 1 (one H100), 2 (an A100 and an RTX 5090),
# volta (a V100), broken (driver not loaded: the message must never become an architecture).
set -u
setup=$1; shift
case "$setup" in
  0) gpus=() ;;
  1) gpus=("0, GPU-11111111-aaaa, NVIDIA H100 80GB HBM3, 9.0") ;;
  2) gpus=("0, GPU-22222222-bbbb, NVIDIA A100-SXM4-80GB, 8.0" "1, GPU-33333333-cccc, NVIDIA GeForce RTX 5090, 12.0") ;;
  volta) gpus=("0, GPU-44444444-dddd, Tesla V100-SXM2-16GB, 7.0") ;;
  broken) echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."; exit 9 ;;
  *) echo "fake-nvidia-smi: unknown setup $setup" >&2; exit 2 ;;
esac
case "$*" in
  "--query-gpu=index,uuid,name,compute_cap --format=csv,noheader")
    for g in "${gpus[@]+"${gpus[@]}"}"; do echo "$g"; done ;;
  *) echo "fake-nvidia-smi: unsupported arguments: $*" >&2; exit 2 ;;
esac
