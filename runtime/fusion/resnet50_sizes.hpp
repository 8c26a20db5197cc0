// Element counts of the 161 parameter tensors of torchvision's ResNet-50 (v1.5, 1000 classes),
// in definition order: the order of `model.named_parameters()`. Gradients arrive in roughly
// the reverse of this order during backward. Used by the pipeline benchmark and fusion tests.
//
// Derivation: built below from the architecture rather than typed in, mirroring
// torchvision.models.resnet.ResNet(Bottleneck, [3, 4, 6, 3]):
//   conv1 7x7 3->64 (weight only), bn1 (weight, bias);
//   layer1..4 with widths 64/128/256/512, expansion 4, blocks 3/4/6/3; each Bottleneck holds
//   conv1 1x1 in->w, bn1, conv2 3x3 w->w, bn2, conv3 1x1 w->4w, bn3, and its first block a
//   downsample (conv 1x1 in->4w, bn); convolutions have no bias, batch norms have weight+bias
//   (running statistics are buffers, not parameters);
//   fc 2048->1000 (weight, bias).
// Checks: 161 tensors, 25,557,032 parameters (the figure torchvision documents).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace chorus {

inline constexpr std::size_t resnet50_tensor_count = 161;
inline constexpr uint64_t resnet50_parameter_count = 25'557'032;

namespace detail {
constexpr std::array<uint64_t, resnet50_tensor_count> make_resnet50_sizes() {
  std::array<uint64_t, resnet50_tensor_count> s{};
  std::size_t n = 0;
  auto conv = [&](uint64_t in, uint64_t out, uint64_t k) { s[n++] = in * out * k * k; };
  auto bn = [&](uint64_t c) {
    s[n++] = c;  // weight
    s[n++] = c;  // bias
  };
  conv(3, 64, 7);
  bn(64);
  uint64_t in = 64;
  constexpr uint64_t widths[] = {64, 128, 256, 512};
  constexpr int blocks[] = {3, 4, 6, 3};
  for (int layer = 0; layer < 4; ++layer) {
    const uint64_t w = widths[layer], out = 4 * w;
    for (int b = 0; b < blocks[layer]; ++b) {
      conv(in, w, 1);
      bn(w);
      conv(w, w, 3);
      bn(w);
      conv(w, out, 1);
      bn(out);
      if (b == 0) {  // downsample: stride or channel change
        conv(in, out, 1);
        bn(out);
      }
      in = out;
    }
  }
  s[n++] = 2048 * 1000;  // fc.weight
  s[n++] = 1000;         // fc.bias
  return s;
}
}  // namespace detail

/// Parameter tensor element counts of ResNet-50, in definition order (conv1.weight first,
/// fc.bias last). Multiply by the element size (4 for f32) for bytes.
inline constexpr std::array<uint64_t, resnet50_tensor_count> resnet50_sizes = detail::make_resnet50_sizes();

namespace detail {
constexpr uint64_t sum_resnet50_sizes() {
  uint64_t total = 0;
  for (uint64_t v : resnet50_sizes) total += v;
  return total;
}
}  // namespace detail
static_assert(detail::sum_resnet50_sizes() == resnet50_parameter_count, "ResNet-50 has 25,557,032 parameters");

}  // namespace chorus
