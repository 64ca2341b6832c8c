#include "llmc_reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

namespace tessel::workers::reference {
namespace {

// The parameter tensors' indices in Gpt2Tensors.
enum Param : int {
  kWte,
  kWpe,
  kLn1w,
  kLn1b,
  kQkvw,
  kQkvb,
  kAttprojw,
  kAttprojb,
  kLn2w,
  kLn2b,
  kFcw,
  kFcb,
  kFcprojw,
  kFcprojb,
  kLnfw,
  kLnfb,
  kParams
};

using Vec = std::vector<double>;
size_t Z(int64_t i) { return static_cast<size_t>(i); }

// llm.c's layers, each forward and backward as train_gpt2.c writes it (backwards accumulate with +=).

void EncoderForward(double* out, const int* inp, const double* wte, const double* wpe, int b, int t, int c) {
  for (int i = 0; i < b * t; ++i) {
    for (int j = 0; j < c; ++j) out[i * c + j] = wte[inp[i] * c + j] + wpe[(i % t) * c + j];
  }
}

void EncoderBackward(double* dwte, double* dwpe, const double* dout, const int* inp, int b, int t, int c) {
  for (int i = 0; i < b * t; ++i) {
    for (int j = 0; j < c; ++j) {
      dwte[inp[i] * c + j] += dout[i * c + j];
      dwpe[(i % t) * c + j] += dout[i * c + j];
    }
  }
}

void LayernormForward(double* out, double* mean, double* rstd, const double* inp, const double* w, const double* bias,
                      int n, int c) {
  for (int i = 0; i < n; ++i) {
    const double* x = inp + i * c;
    double m = 0;
    for (int j = 0; j < c; ++j) m += x[j];
    m /= c;
    double v = 0;
    for (int j = 0; j < c; ++j) v += (x[j] - m) * (x[j] - m);
    v /= c;
    const double s = 1.0 / std::sqrt(v + 1e-5);
    for (int j = 0; j < c; ++j) out[i * c + j] = (x[j] - m) * s * w[j] + bias[j];
    mean[i] = m;
    rstd[i] = s;
  }
}

void LayernormBackward(double* dinp, double* dw, double* db, const double* dout, const double* inp, const double* w,
                       const double* mean, const double* rstd, int n, int c) {
  for (int i = 0; i < n; ++i) {
    const double* dy = dout + i * c;
    const double* x = inp + i * c;
    double dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int j = 0; j < c; ++j) {
      const double norm = (x[j] - mean[i]) * rstd[i];
      dnorm_mean += w[j] * dy[j];
      dnorm_norm_mean += w[j] * dy[j] * norm;
    }
    dnorm_mean /= c;
    dnorm_norm_mean /= c;
    for (int j = 0; j < c; ++j) {
      const double norm = (x[j] - mean[i]) * rstd[i];
      const double dnorm = w[j] * dy[j];
      db[j] += dy[j];
      dw[j] += norm * dy[j];
      dinp[i * c + j] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[i];
    }
  }
}

// out [n, oc] = inp [n, c] weight^T (weight [oc, c]) + bias (may be null).
void MatmulForward(double* out, const double* inp, const double* weight, const double* bias, int n, int c, int oc) {
  for (int i = 0; i < n; ++i) {
    for (int o = 0; o < oc; ++o) {
      double s = bias != nullptr ? bias[o] : 0.0;
      for (int j = 0; j < c; ++j) s += inp[i * c + j] * weight[o * c + j];
      out[i * oc + o] = s;
    }
  }
}

void MatmulBackward(double* dinp, double* dweight, double* dbias, const double* dout, const double* inp,
                    const double* weight, int n, int c, int oc) {
  for (int i = 0; i < n; ++i) {
    for (int o = 0; o < oc; ++o) {
      const double d = dout[i * oc + o];
      for (int j = 0; j < c; ++j) {
        dinp[i * c + j] += weight[o * c + j] * d;
        dweight[o * c + j] += inp[i * c + j] * d;
      }
      if (dbias != nullptr) dbias[o] += d;
    }
  }
}

// inp [b, t, 3c] holds q, k, v; att [b, nh, t, t] the softmax (kept for the backward); out [b, t, c].
void AttentionForward(double* out, double* att, const double* inp, int b, int t, int c, int nh) {
  const int c3 = 3 * c, hs = c / nh;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  for (int bi = 0; bi < b; ++bi) {
    for (int ti = 0; ti < t; ++ti) {
      for (int h = 0; h < nh; ++h) {
        const double* q = inp + bi * t * c3 + ti * c3 + h * hs;
        double* a = att + bi * nh * t * t + h * t * t + ti * t;
        double max = -INFINITY;
        for (int t2 = 0; t2 <= ti; ++t2) {
          const double* k = inp + bi * t * c3 + t2 * c3 + h * hs + c;
          double s = 0;
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          a[t2] = s * scale;
          max = std::max(max, a[t2]);
        }
        double sum = 0;
        for (int t2 = 0; t2 <= ti; ++t2) sum += (a[t2] = std::exp(a[t2] - max));
        for (int t2 = 0; t2 < t; ++t2) a[t2] = t2 <= ti ? a[t2] / sum : 0.0;
        double* y = out + bi * t * c + ti * c + h * hs;
        for (int i = 0; i < hs; ++i) y[i] = 0;
        for (int t2 = 0; t2 <= ti; ++t2) {
          const double* v = inp + bi * t * c3 + t2 * c3 + h * hs + 2 * c;
          for (int i = 0; i < hs; ++i) y[i] += a[t2] * v[i];
        }
      }
    }
  }
}

void AttentionBackward(double* dinp, const double* dout, const double* inp, const double* att, int b, int t, int c,
                       int nh) {
  const int c3 = 3 * c, hs = c / nh;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  Vec datt(Z(t)), dpreatt(Z(t));
  for (int bi = 0; bi < b; ++bi) {
    for (int ti = 0; ti < t; ++ti) {
      for (int h = 0; h < nh; ++h) {
        const double* a = att + bi * nh * t * t + h * t * t + ti * t;
        const double* dy = dout + bi * t * c + ti * c + h * hs;
        const double* q = inp + bi * t * c3 + ti * c3 + h * hs;
        double* dq = dinp + bi * t * c3 + ti * c3 + h * hs;
        std::fill(datt.begin(), datt.end(), 0.0);
        std::fill(dpreatt.begin(), dpreatt.end(), 0.0);
        // y = att v
        for (int t2 = 0; t2 <= ti; ++t2) {
          const double* v = inp + bi * t * c3 + t2 * c3 + h * hs + 2 * c;
          double* dv = dinp + bi * t * c3 + t2 * c3 + h * hs + 2 * c;
          for (int i = 0; i < hs; ++i) {
            datt[Z(t2)] += v[i] * dy[i];
            dv[i] += a[t2] * dy[i];
          }
        }
        // the softmax
        for (int t2 = 0; t2 <= ti; ++t2) {
          for (int t3 = 0; t3 <= ti; ++t3) {
            dpreatt[Z(t3)] += a[t2] * ((t2 == t3 ? 1.0 : 0.0) - a[t3]) * datt[Z(t2)];
          }
        }
        // preatt = scale q k
        for (int t2 = 0; t2 <= ti; ++t2) {
          const double* k = inp + bi * t * c3 + t2 * c3 + h * hs + c;
          double* dk = dinp + bi * t * c3 + t2 * c3 + h * hs + c;
          for (int i = 0; i < hs; ++i) {
            dq[i] += k[i] * dpreatt[Z(t2)] * scale;
            dk[i] += q[i] * dpreatt[Z(t2)] * scale;
          }
        }
      }
    }
  }
}

const double kGeluScale = std::sqrt(2.0 / M_PI);

void GeluForward(double* out, const double* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] = 0.5 * x * (1.0 + std::tanh(kGeluScale * (x + 0.044715 * x * x * x)));
  }
}

void GeluBackward(double* dinp, const double* inp, const double* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double arg = kGeluScale * (x + 0.044715 * x * x * x);
    const double th = std::tanh(arg), ch = std::cosh(arg);
    const double local = 0.5 * (1.0 + th) + x * 0.5 * (1.0 / (ch * ch)) * kGeluScale * (1.0 + 3.0 * 0.044715 * x * x);
    dinp[i] += local * dout[i];
  }
}

}  // namespace

std::vector<Gpt2Tensor> Gpt2Tensors(const Gpt2Shape& s) {
  const int64_t c = s.channels;
  using Named = std::pair<const char*, std::vector<int64_t>>;
  const Named named[kParams] = {{"wte", {s.padded_vocab, c}},
                                {"wpe", {s.max_t, c}},
                                {"ln1w", {c}},
                                {"ln1b", {c}},
                                {"qkvw", {3 * c, c}},
                                {"qkvb", {3 * c}},
                                {"attprojw", {c, c}},
                                {"attprojb", {c}},
                                {"ln2w", {c}},
                                {"ln2b", {c}},
                                {"fcw", {4 * c, c}},
                                {"fcb", {4 * c}},
                                {"fcprojw", {c, 4 * c}},
                                {"fcprojb", {c}},
                                {"lnfw", {c}},
                                {"lnfb", {c}}};
  std::vector<Gpt2Tensor> out;
  int64_t offset = 0;
  for (int i = 0; i < kParams; ++i) {
    Gpt2Tensor t{named[i].first, named[i].second, i >= kLn1w && i <= kFcprojb, offset, 1};
    for (int64_t d : t.shape) t.numel *= d;
    if (t.per_layer) t.numel *= s.layers;
    offset += t.numel;
    out.push_back(std::move(t));
  }
  return out;
}

Gpt2::Gpt2(const Gpt2Shape& shape, std::vector<double> params)
    : shape_(shape), tensors_(Gpt2Tensors(shape)), params_(std::move(params)) {
  assert(static_cast<int64_t>(params_.size()) == tensors_.back().offset + tensors_.back().numel);
  grads_.assign(params_.size(), 0.0);
  m_.assign(params_.size(), 0.0);
  v_.assign(params_.size(), 0.0);
}

double Gpt2::ForwardBackward(const std::vector<int>& inputs, const std::vector<int>& targets, int b, int t) {
  const int c = shape_.channels, l_count = shape_.layers, nh = shape_.heads, v = shape_.vocab;
  const int vp = shape_.padded_vocab, n = b * t;
  assert(t <= shape_.max_t && c % nh == 0);
  assert(static_cast<int>(inputs.size()) == n && static_cast<int>(targets.size()) == n);
  // Per-layer offset of a per-layer tensor.
  const auto at = [&](int p, int l) { return P(p) + l * (tensors_[Z(p)].numel / l_count); };
  const auto gat = [&](int p, int l) { return G(p) + l * (tensors_[Z(p)].numel / l_count); };

  // Forward, keeping every activation of every layer.
  struct Layer {
    Vec in, ln1, mean1, rstd1, qkv, att, atty, res2, ln2, mean2, rstd2, fch, fchg;
  };
  std::vector<Layer> acts(Z(l_count));
  Vec x(Z(n * c));
  EncoderForward(x.data(), inputs.data(), P(kWte), P(kWpe), b, t, c);
  for (int l = 0; l < l_count; ++l) {
    Layer& a = acts[Z(l)];
    a.in = x;
    a.ln1.resize(Z(n * c)), a.mean1.resize(Z(n)), a.rstd1.resize(Z(n));
    a.qkv.resize(Z(n * 3 * c)), a.att.resize(Z(b * nh * t * t)), a.atty.resize(Z(n * c));
    a.ln2.resize(Z(n * c)), a.mean2.resize(Z(n)), a.rstd2.resize(Z(n));
    a.fch.resize(Z(n * 4 * c)), a.fchg.resize(Z(n * 4 * c));
    Vec proj(Z(n * c));
    LayernormForward(a.ln1.data(), a.mean1.data(), a.rstd1.data(), a.in.data(), at(kLn1w, l), at(kLn1b, l), n, c);
    MatmulForward(a.qkv.data(), a.ln1.data(), at(kQkvw, l), at(kQkvb, l), n, c, 3 * c);
    AttentionForward(a.atty.data(), a.att.data(), a.qkv.data(), b, t, c, nh);
    MatmulForward(proj.data(), a.atty.data(), at(kAttprojw, l), at(kAttprojb, l), n, c, c);
    a.res2 = a.in;
    for (size_t i = 0; i < proj.size(); ++i) a.res2[i] += proj[i];
    LayernormForward(a.ln2.data(), a.mean2.data(), a.rstd2.data(), a.res2.data(), at(kLn2w, l), at(kLn2b, l), n, c);
    MatmulForward(a.fch.data(), a.ln2.data(), at(kFcw, l), at(kFcb, l), n, c, 4 * c);
    GeluForward(a.fchg.data(), a.fch.data(), n * 4 * c);
    MatmulForward(proj.data(), a.fchg.data(), at(kFcprojw, l), at(kFcprojb, l), n, 4 * c, c);
    x = a.res2;
    for (size_t i = 0; i < proj.size(); ++i) x[i] += proj[i];
  }
  Vec lnf(Z(n * c)), meanf(Z(n)), rstdf(Z(n)), logits(Z(n * vp));
  LayernormForward(lnf.data(), meanf.data(), rstdf.data(), x.data(), P(kLnfw), P(kLnfb), n, c);
  MatmulForward(logits.data(), lnf.data(), P(kWte), nullptr, n, c, vp);
  // Softmax and cross-entropy over the first V logits; the padded ones get no gradient.
  double loss = 0;
  Vec dlogits(Z(n * vp), 0.0);
  for (int i = 0; i < n; ++i) {
    const double* z = logits.data() + Z(i) * Z(vp);
    double max = -INFINITY;
    for (int j = 0; j < v; ++j) max = std::max(max, z[j]);
    double sum = 0;
    for (int j = 0; j < v; ++j) sum += std::exp(z[j] - max);
    loss += -(z[targets[Z(i)]] - max - std::log(sum));
    for (int j = 0; j < v; ++j) {
      const double prob = std::exp(z[j] - max) / sum;
      dlogits[Z(i) * Z(vp) + Z(j)] = (prob - (j == targets[Z(i)] ? 1.0 : 0.0)) / n;
    }
  }
  loss /= n;

  // Backward. `dx` is the gradient of the residual stream at the current point; each layer's LayerNorm
  // backward adds its share to the share that passes straight through the residual connection.
  std::fill(grads_.begin(), grads_.end(), 0.0);
  Vec dlnf(Z(n * c), 0.0), dx(Z(n * c), 0.0);
  MatmulBackward(dlnf.data(), G(kWte), nullptr, dlogits.data(), lnf.data(), P(kWte), n, c, vp);
  LayernormBackward(dx.data(), G(kLnfw), G(kLnfb), dlnf.data(), x.data(), P(kLnfw), meanf.data(), rstdf.data(), n, c);
  for (int l = l_count - 1; l >= 0; --l) {
    const Layer& a = acts[Z(l)];
    Vec dfchg(Z(n * 4 * c), 0.0), dfch(Z(n * 4 * c), 0.0), dln2(Z(n * c), 0.0);
    MatmulBackward(dfchg.data(), gat(kFcprojw, l), gat(kFcprojb, l), dx.data(), a.fchg.data(), at(kFcprojw, l), n,
                   4 * c, c);
    GeluBackward(dfch.data(), a.fch.data(), dfchg.data(), n * 4 * c);
    MatmulBackward(dln2.data(), gat(kFcw, l), gat(kFcb, l), dfch.data(), a.ln2.data(), at(kFcw, l), n, c, 4 * c);
    LayernormBackward(dx.data(), gat(kLn2w, l), gat(kLn2b, l), dln2.data(), a.res2.data(), at(kLn2w, l), a.mean2.data(),
                      a.rstd2.data(), n, c);
    Vec datty(Z(n * c), 0.0), dqkv(Z(n * 3 * c), 0.0), dln1(Z(n * c), 0.0);
    MatmulBackward(datty.data(), gat(kAttprojw, l), gat(kAttprojb, l), dx.data(), a.atty.data(), at(kAttprojw, l), n, c,
                   c);
    AttentionBackward(dqkv.data(), datty.data(), a.qkv.data(), a.att.data(), b, t, c, nh);
    MatmulBackward(dln1.data(), gat(kQkvw, l), gat(kQkvb, l), dqkv.data(), a.ln1.data(), at(kQkvw, l), n, c, 3 * c);
    LayernormBackward(dx.data(), gat(kLn1w, l), gat(kLn1b, l), dln1.data(), a.in.data(), at(kLn1w, l), a.mean1.data(),
                      a.rstd1.data(), n, c);
  }
  EncoderBackward(G(kWte), G(kWpe), dx.data(), inputs.data(), b, t, c);
  return loss;
}

void Gpt2::Update(const AdamWSettings& h, int step) {
  const double b1c = 1.0 - std::pow(h.beta1, step), b2c = 1.0 - std::pow(h.beta2, step);
  for (int k = 0; k < kParams; ++k) {
    const bool decays = k == kWte || k == kWpe || k == kQkvw || k == kAttprojw || k == kFcw || k == kFcprojw;
    const double wd = decays ? h.weight_decay : 0.0;
    const Gpt2Tensor& tensor = tensors_[Z(k)];
    for (int64_t i = tensor.offset; i < tensor.offset + tensor.numel; ++i) {
      const size_t j = Z(i);
      const double g = grads_[j];
      m_[j] = h.beta1 * m_[j] + (1.0 - h.beta1) * g;
      v_[j] = h.beta2 * v_[j] + (1.0 - h.beta2) * g * g;
      const double m_hat = m_[j] / b1c, v_hat = v_[j] / b2c;
      params_[j] -= h.lr * (m_hat / (std::sqrt(v_hat) + h.eps) + wd * params_[j]);
    }
  }
}

}  // namespace tessel::workers::reference
