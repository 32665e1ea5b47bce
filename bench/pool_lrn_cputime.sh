#!/bin/bash
# CPU time of the pooling and LRN layers of LeNet b64, CIFAR-10 quick b100,
# AlexNet b10 and ResNet-50 b8 under each CPU implementation they offer
# (vector, onednn, reference), on this CPU's best ISA and as on an AVX2-only
# machine (PSTRAIN_CPU_ISA=avx2, ONEDNN_MAX_CPU_ISA=AVX2). Figures:
# docs/benchmarks.md. Needs build/bin/layer-cputime (bench/layer_cputime.cpp).
# usage: bash bench/pool_lrn_cputime.sh [build folder, default build]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}/bin/layer-cputime
run() {  # label layer-text shape
  for isa in best avx2; do  # best: what this CPU runs
    if [ $isa = avx2 ]; then E="PSTRAIN_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2"; else E=""; fi
    env $E $B --layer "$2" --shape $3 --iterations 9 | sed "s/^/$1 $isa /"
  done
}
P() { echo "name: 'p' type: 'Pooling' pooling_param { $1 }"; }
run lenet.pool1:64x20x24x24 "$(P 'pool: MAX kernel_size: 2 stride: 2')" 64,20,24,24
run lenet.pool2:64x50x8x8 "$(P 'pool: MAX kernel_size: 2 stride: 2')" 64,50,8,8
run cifar.pool1:100x32x32x32 "$(P 'pool: MAX kernel_size: 3 stride: 2')" 100,32,32,32
run cifar.pool2:100x32x16x16 "$(P 'pool: AVE kernel_size: 3 stride: 2')" 100,32,16,16
run cifar.pool3:100x64x8x8 "$(P 'pool: AVE kernel_size: 3 stride: 2')" 100,64,8,8
run alexnet.pool1:10x96x55x55 "$(P 'pool: MAX kernel_size: 3 stride: 2')" 10,96,55,55
run alexnet.pool2:10x256x27x27 "$(P 'pool: MAX kernel_size: 3 stride: 2')" 10,256,27,27
run alexnet.pool5:10x256x13x13 "$(P 'pool: MAX kernel_size: 3 stride: 2')" 10,256,13,13
run alexnet.norm1:10x96x55x55 "name: 'n' type: 'LRN' lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }" 10,96,55,55
run alexnet.norm2:10x256x27x27 "name: 'n' type: 'LRN' lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }" 10,256,27,27
run resnet.pool1:8x64x112x112-pad1 "$(P 'pool: MAX kernel_size: 3 stride: 2 pad: 1')" 8,64,112,112
run resnet.pool5:8x2048x7x7-global-AVE "$(P 'pool: AVE global_pooling: true')" 8,2048,7,7
