#include "reference/random_model.hpp"

#include <Eigen/Dense>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/fp16.hpp"
#include "core/inputs/normal.hpp"
#include "core/routing/rng.hpp"
#include "core/sizes.hpp"

namespace tilemix {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const Matrix>;

// N(0, 1 / fan_in) weights rounded to FP16, one generator stream per matrix.
std::vector<float> weights(int fan_in, int fan_out, uint64_t seed, uint64_t stream) {
  NormalStream normal(mix_seed(seed, stream));
  const double scale = 1.0 / std::sqrt(static_cast<double>(fan_in));
  std::vector<float> w(static_cast<size_t>(fan_in) * fan_out);
  for (float& x : w) x = round_to_half(static_cast<float>(scale * normal.next()));
  return w;
}

void round_all_to_half(Matrix& m) {
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = tilemix::round_to_half(m.data()[i]);
}

// FP16(x / rms(x)) per row, the mean of squares summed in double (no learned gain).
Matrix rms_norm(const Matrix& x) {
  Matrix y(x.rows(), x.cols());
#pragma omp parallel for schedule(static)
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    double sum = 0.0;
    for (Eigen::Index c = 0; c < x.cols(); ++c) sum += static_cast<double>(x(r, c)) * x(r, c);
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(x.cols()) + 1e-6);
    for (Eigen::Index c = 0; c < x.cols(); ++c) y(r, c) = round_to_half(static_cast<float>(x(r, c) * inv));
  }
  return y;
}

// FP16(a @ w) with fp32 sums.
Matrix project(const Matrix& a, const std::vector<float>& w, int fan_out) {
  Matrix out = a * ConstMap(w.data(), a.cols(), fan_out);
  round_all_to_half(out);
  return out;
}

std::vector<uint16_t> to_half_bits(const Matrix& m) {
  std::vector<uint16_t> bits(static_cast<size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.size(); ++i) bits[static_cast<size_t>(i)] = float_to_half(m.data()[i]);
  return bits;
}

}  // namespace

RandomModel make_random_model(const AttentionShape& shape, int layers, int vocab, uint64_t seed) {
  if (layers < 1 || vocab < 1) throw std::invalid_argument("make_random_model: layers and vocab must be >= 1");
  for (int b = 0; b < shape.batch(); ++b) {
    if (shape.seqlen_q(b) != shape.seqlen_k(b)) {
      throw std::invalid_argument("make_random_model: the model is self-attention (Lq = Lk for every sequence)");
    }
  }
  checked_product("vocab", "the logits [tokens, vocab] in floats",
                  {{shape.total_q(), "tokens"}, {vocab, "vocab"}, {4, "bytes"}});
  RandomModel m;
  m.layers = layers;
  m.hidden = shape.hq * shape.d;
  m.q_dim = shape.hq * shape.d;
  m.kv_dim = shape.hk * shape.d;
  m.vocab = vocab;
  for (int l = 0; l < layers; ++l) {
    const uint64_t stream = 4 * static_cast<uint64_t>(l);
    m.wq.push_back(weights(m.hidden, m.q_dim, seed, stream));
    m.wk.push_back(weights(m.hidden, m.kv_dim, seed, stream + 1));
    m.wv.push_back(weights(m.hidden, m.kv_dim, seed, stream + 2));
    m.wo.push_back(weights(m.q_dim, m.hidden, seed, stream + 3));
  }
  // Its own stream, so that models of every depth share it (and their first layers).
  m.w_vocab = weights(m.hidden, vocab, seed, ~uint64_t{0});
  return m;
}

std::vector<uint16_t> random_model_input(const AttentionShape& shape, uint64_t seed) {
  const int64_t tokens = shape.total_q(), hidden = static_cast<int64_t>(shape.hq) * shape.d;
  std::vector<uint16_t> x(static_cast<size_t>(tokens * hidden));
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    NormalStream normal(mix_seed(seed, static_cast<uint64_t>(t)));
    for (int64_t c = 0; c < hidden; ++c) x[static_cast<size_t>(t * hidden + c)] = float_to_half(normal.next());
  }
  return x;
}

std::vector<float> run_random_model(const RandomModel& model, const AttentionShape& shape,
                                    const std::vector<uint16_t>& input, const ModelAttention& attention) {
  const Eigen::Index tokens = shape.total_q();
  if (input.size() != static_cast<size_t>(tokens) * model.hidden) {
    throw std::invalid_argument("run_random_model: the input is not [total tokens, hq * d]");
  }
  Matrix x(tokens, model.hidden);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = half_to_float(input[static_cast<size_t>(i)]);
  for (int l = 0; l < model.layers; ++l) {
    const Matrix h = rms_norm(x);
    AttentionInputs qkv{to_half_bits(project(h, model.wq[l], model.q_dim)),
                        to_half_bits(project(h, model.wk[l], model.kv_dim)),
                        to_half_bits(project(h, model.wv[l], model.kv_dim))};
    const std::vector<uint16_t> o = attention(qkv);
    if (o.size() != static_cast<size_t>(tokens) * model.q_dim) {
      throw std::runtime_error("run_random_model: attention returned " + std::to_string(o.size()) +
                               " values, not [total tokens, hq * d]");
    }
    Matrix a(tokens, model.q_dim);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = half_to_float(o[static_cast<size_t>(i)]);
    const Matrix y = project(a, model.wo[l], model.hidden);
    x += y;
    round_all_to_half(x);
  }
  const Matrix logits = project(rms_norm(x), model.w_vocab, model.vocab);
  return std::vector<float>(logits.data(), logits.data() + logits.size());
}

}  // namespace tilemix
