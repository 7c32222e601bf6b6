#include "eval/kl_divergence.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <utility>

#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::eval {

namespace {

int nearest_int(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

// One position of the base: its log-probabilities as llama-perplexity
// writes them to its base file: a float scale and minimum (the log-prob 16
// nats under the top one, or the lowest), then one uint16 step count per
// token, 0 for the tokens under the minimum.
struct BaseRow {
  float scale = 0, min_log_prob = 0;
  std::vector<uint16_t> steps;
  float log_prob(int64_t v) const { return scale * steps[size_t(v)] + min_log_prob; }
};

void encode_base(const float* logits, int64_t V, BaseRow& row) {
  float max_logit = logits[0], min_logit = logits[0];
  for (int64_t i = 1; i < V; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (int64_t i = 0; i < V; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = float(std::log(sum_exp));
  row.min_log_prob = min_logit - max_logit - log_sum_exp;
  row.scale = (max_logit - min_logit) / 65535.f;
  row.steps.assign(size_t(V), 0);
  if (!row.scale) return;
  const float inv_scale = 1 / row.scale;
  for (int64_t i = 0; i < V; ++i)
    row.steps[size_t(i)] = logits[i] > min_logit ? uint16_t(nearest_int(inv_scale * (logits[i] - min_logit))) : 0;
}

// One position of the model against the base row (llama-perplexity's
// log_softmax with a base): adds to the sums, returns (KLD, p - p_base).
std::pair<double, float> score_position(const float* logits, int64_t V, const BaseRow& base, int32_t tok,
                                        KlDivergence& k) {
  float max_logit = logits[0];
  int64_t imax = 0;
  for (int64_t i = 1; i < V; ++i)
    if (logits[i] > max_logit) max_logit = logits[i], imax = i;
  double sum_exp = 0.0;
  for (int64_t i = 0; i < V; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = float(std::log(sum_exp));
  const float nll = max_logit + log_sum_exp - logits[tok];
  k.sum_nll += nll;
  k.sum_nll2 += double(nll * nll);
  const float nll_base = -base.log_prob(tok);
  k.sum_nll_base += nll_base;
  k.sum_nll_base2 += double(nll_base * nll_base);
  k.sum_nll_nll_base += double(nll * nll_base);
  max_logit += log_sum_exp;
  double sum = 0;
  int64_t imax_base = -1;
  float p_log_base_max = 0;
  for (int64_t i = 0; i < V; ++i) {
    const float p_log_base = base.log_prob(i);
    if (i == 0 || p_log_base > p_log_base_max) p_log_base_max = p_log_base, imax_base = i;
    if (p_log_base > -16.f) sum += std::exp(p_log_base) * (p_log_base - logits[i] + max_logit);
  }
  k.sum_kld += sum;
  k.sum_kld2 += sum * sum;
  ++k.count;
  if (imax == imax_base) ++k.n_same_top;
  const float p_diff = std::exp(-nll) - std::exp(-nll_base);
  k.sum_p_diff += p_diff;
  const double p_diff2 = double(p_diff * p_diff);
  k.sum_p_diff2 += p_diff2;
  k.sum_p_diff4 += p_diff2 * p_diff2;
  k.max_p_diff = std::max(k.max_p_diff, std::fabs(p_diff));
  return {sum, p_diff};
}

std::pair<double, double> mean_and_uncertainty(double sum, double sum2, int64_t count) {
  if (count < 1) return {0., 0.};
  const double f = sum / double(count);
  double df = sum2 / double(count) - f * f;
  df = df > 0 && count > 10 ? std::sqrt(df / double(count - 1)) : 0.;
  return {f, df};
}

double covariance(double suma, double sumb, double sumab, int64_t count) {
  if (count < 10) return 0.0;
  double var = sumab / double(count) - (suma / double(count)) * (sumb / double(count));
  var /= double(count - 1);
  return var;
}

float percentile(const std::vector<float>& values, float fraction) {
  if (fraction <= 0) return values.front();
  if (fraction >= 1) return values.back();
  float p = fraction * float(values.size() - 1);
  const size_t ip = size_t(p);
  p -= float(ip);
  return (1 - p) * values[ip] + p * values[std::min(ip + 1, values.size() - 1)];
}

float median(const std::vector<float>& v) {
  return v.size() % 2 == 0 ? 0.5f * (v[v.size() / 2] + v[v.size() / 2 - 1]) : v[v.size() / 2];
}

// The scored positions of a chunk: first..n_ctx-2 predict the next token.
int64_t scored_rows(int64_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

// One window: the chunk's tokens with BOS put first (as llama-perplexity
// batches them).
void chunk_window(const std::vector<int32_t>& tokens, int64_t c, int64_t n_ctx, int32_t bos,
                  std::vector<int32_t>& window) {
  window.assign(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
  if (bos >= 0) window[0] = bos;
}

// The base's rows of a chunk from its logits.
void base_rows(infer::Decoder& base, const std::vector<int32_t>& window, std::vector<BaseRow>& rows) {
  const int64_t n_ctx = int64_t(window.size()), V = base.config().vocab, first = n_ctx / 2;
  base.reset();
  base.eval(window.data(), n_ctx, true);
  rows.resize(size_t(scored_rows(n_ctx)));
  for (int64_t i = first; i < n_ctx - 1; ++i) encode_base(base.logits() + i * V, V, rows[size_t(i - first)]);
}

// The model over every chunk, against the base rows `rows_of(window)` gives
// (called once per chunk, in order).
KlDivergence score_chunks(infer::Decoder& model, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                          int64_t chunks,
                          const std::function<void(const std::vector<int32_t>&, std::vector<BaseRow>&)>& rows_of,
                          const std::function<void(int64_t, const KlDivergence&)>& on_chunk) {
  const int64_t V = model.config().vocab, first = n_ctx / 2;
  KlDivergence k;
  k.chunks = chunks;
  std::vector<int32_t> window;
  std::vector<BaseRow> rows;
  for (int64_t c = 0; c < chunks; ++c) {
    chunk_window(tokens, c, n_ctx, bos, window);
    rows_of(window, rows);
    model.reset();
    model.eval(window.data(), n_ctx, true);
    for (int64_t i = first; i < n_ctx - 1; ++i) {
      const auto [kld, p_diff] =
          score_position(model.logits() + i * V, V, rows[size_t(i - first)], tokens[size_t(c * n_ctx + i + 1)], k);
      k.kld_values.push_back(float(kld));
      k.p_diff_values.push_back(p_diff);
    }
    if (on_chunk) on_chunk(c, k);
  }
  return k;
}

constexpr char kBaseMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

// uint16 values per base row: the two floats, the steps, padded even.
int64_t row_width(int64_t vocab) { return 2 * ((vocab + 1) / 2) + 4; }

void check_lengths(const std::vector<int32_t>& tokens, int64_t n_ctx, int64_t limit_ctx) {
  if (n_ctx < 2 || n_ctx > limit_ctx) fail("kl-divergence: context {} must be in [2, {}]", n_ctx, limit_ctx);
  if (int64_t(tokens.size()) < 2 * n_ctx)
    fail("kl-divergence: the text has {} tokens; at least {} (2 x context {}) are needed", tokens.size(), 2 * n_ctx,
         n_ctx);
}

int64_t chunk_count(const std::vector<int32_t>& tokens, int64_t n_ctx, int64_t max_chunks) {
  const int64_t n = int64_t(tokens.size()) / n_ctx;
  return max_chunks > 0 ? std::min(n, max_chunks) : n;
}

}  // namespace

KlDivergence kl_divergence(infer::Decoder& model, infer::Decoder& base, const std::vector<int32_t>& tokens,
                           int64_t n_ctx, int32_t bos, int64_t max_chunks,
                           const std::function<void(int64_t, const KlDivergence&)>& on_chunk) {
  const int64_t V = model.config().vocab;
  if (base.config().vocab != V)
    fail("kl-divergence: the base has {} tokens in its vocabulary, the model {}; compare a model with its own base",
         base.config().vocab, V);
  check_lengths(tokens, n_ctx, std::min(model.n_ctx(), base.n_ctx()));
  return score_chunks(
      model, tokens, n_ctx, bos, chunk_count(tokens, n_ctx, max_chunks),
      [&](const std::vector<int32_t>& window, std::vector<BaseRow>& rows) { base_rows(base, window, rows); }, on_chunk);
}

void write_kl_divergence_base(infer::Decoder& base, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                              int64_t max_chunks, const std::string& path) {
  check_lengths(tokens, n_ctx, base.n_ctx());
  const int64_t chunks = chunk_count(tokens, n_ctx, max_chunks), V = base.config().vocab, nv = row_width(V);
  AtomicFileWriter out(path);
  const uint32_t ctx32 = uint32_t(n_ctx);
  const int32_t vocab32 = int32_t(V), chunks32 = int32_t(chunks);
  out.write(kBaseMagic, 8);
  out.write(&ctx32, 4);
  out.write(&vocab32, 4);
  out.write(&chunks32, 4);
  out.write(tokens.data(), size_t(chunks * n_ctx) * 4);
  std::vector<int32_t> window;
  std::vector<BaseRow> rows;
  std::vector<uint16_t> packed(size_t(nv), 0);
  for (int64_t c = 0; c < chunks; ++c) {
    chunk_window(tokens, c, n_ctx, bos, window);
    base_rows(base, window, rows);
    for (const BaseRow& r : rows) {
      std::memcpy(packed.data(), &r.scale, 4);
      std::memcpy(packed.data() + 2, &r.min_log_prob, 4);
      std::copy(r.steps.begin(), r.steps.end(), packed.begin() + 4);
      out.write(packed.data(), packed.size() * 2);
    }
  }
  out.commit();
}

bool is_kl_divergence_base(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, 8) && std::memcmp(magic, kBaseMagic, 8) == 0;
}

KlDivergence kl_divergence_from_base(infer::Decoder& model, const std::string& path, int32_t bos, int64_t max_chunks,
                                     const std::function<void(int64_t, const KlDivergence&)>& on_chunk) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read", path);
  in.seekg(0, std::ios::end);
  const int64_t size = int64_t(in.tellg());
  in.seekg(0);
  char magic[8] = {};
  uint32_t ctx32 = 0;
  int32_t vocab32 = 0, chunks32 = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, kBaseMagic, 8) != 0)
    fail("{}: not a llama-perplexity base file (no \"_logits_\" at its start); give a GGUF base or a file "
         "llama-perplexity --kl-divergence-base wrote",
         path);
  if (!in.read(reinterpret_cast<char*>(&ctx32), 4) || !in.read(reinterpret_cast<char*>(&vocab32), 4) ||
      !in.read(reinterpret_cast<char*>(&chunks32), 4))
    fail("{}: truncated in its header (context, vocabulary size, chunk count)", path);
  const int64_t n_ctx = ctx32, V = model.config().vocab;
  if (vocab32 != V)
    fail("{}: its base has a vocabulary of {} tokens, the model {}; compare a model with its own base", path, vocab32,
         V);
  if (n_ctx < 2 || n_ctx > model.n_ctx())
    fail("{}: its context is {}; the model runs [2, {}] (raise -c)", path, n_ctx, model.n_ctx());
  if (chunks32 < 1) fail("{}: its chunk count is {}; a base file holds at least one chunk", path, chunks32);
  const int64_t nv = row_width(V), rows = scored_rows(n_ctx);
  const int64_t want = 20 + int64_t(chunks32) * n_ctx * 4 + int64_t(chunks32) * rows * nv * 2;
  if (size != want)
    fail("{}: {} bytes where its header ({} chunks of {} tokens, vocabulary {}) makes {}; the file is cut or not "
         "one base file",
         path, size, chunks32, n_ctx, V, want);
  std::vector<int32_t> tokens(size_t(int64_t(chunks32) * n_ctx));
  in.read(reinterpret_cast<char*>(tokens.data()), std::streamsize(tokens.size() * 4));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      fail("{}: token {} is {}, outside the vocabulary of {}", path, i, tokens[i], V);
  std::vector<uint16_t> packed(static_cast<size_t>(nv));
  const int64_t chunks = max_chunks > 0 ? std::min<int64_t>(chunks32, max_chunks) : chunks32;
  return score_chunks(
      model, tokens, n_ctx, bos, chunks,
      [&](const std::vector<int32_t>&, std::vector<BaseRow>& out) {
        // Chunks come in order: each one's rows follow the last's.
        out.resize(size_t(rows));
        for (BaseRow& r : out) {
          if (!in.read(reinterpret_cast<char*>(packed.data()), std::streamsize(packed.size() * 2)))
            fail("{}: cannot read a base row", path);
          std::memcpy(&r.scale, packed.data(), 4);
          std::memcpy(&r.min_log_prob, packed.data() + 2, 4);
          r.steps.assign(packed.begin() + 4, packed.begin() + 4 + V);
        }
      },
      on_chunk);
}

std::string kl_divergence_report(KlDivergence k) {
  if (k.count < 100) return {};
  std::sort(k.kld_values.begin(), k.kld_values.end());
  std::sort(k.p_diff_values.begin(), k.p_diff_values.end());
  std::string out = "====== Perplexity statistics ======\n";
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  const auto log_ppl = mean_and_uncertainty(k.sum_nll, k.sum_nll2, k.count);
  const double ppl_val = std::exp(log_ppl.first), ppl_unc = ppl_val * log_ppl.second;
  line(fmt::format("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}", ppl_val, ppl_unc));
  const auto log_ppl_base = mean_and_uncertainty(k.sum_nll_base, k.sum_nll_base2, k.count);
  const double ppl_base_val = std::exp(log_ppl_base.first), ppl_base_unc = ppl_base_val * log_ppl_base.second;
  line(fmt::format("Mean PPL(base)                : {:10.6f} ± {:10.6f}", ppl_base_val, ppl_base_unc));
  const double log_ppl_cov = covariance(k.sum_nll, k.sum_nll_base, k.sum_nll_nll_base, k.count);
  line(fmt::format("Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%",
                   100.0 * log_ppl_cov / (log_ppl.second * log_ppl_base.second)));
  const double ratio = log_ppl.first - log_ppl_base.first;
  const double ratio_unc =
      std::sqrt(log_ppl.second * log_ppl.second + log_ppl_base.second * log_ppl_base.second - 2.0 * log_ppl_cov);
  line(fmt::format("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}", ratio, ratio_unc));
  line(
      fmt::format("Mean PPL(Q)/PPL(base)         : {:10.6f} ± {:10.6f}", std::exp(ratio), std::exp(ratio) * ratio_unc));
  const double ppl_cov = ppl_val * ppl_base_val * log_ppl_cov;
  line(fmt::format("Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}", ppl_val - ppl_base_val,
                   std::sqrt(ppl_unc * ppl_unc + ppl_base_unc * ppl_base_unc - 2.0 * ppl_cov)));
  line("");
  line("====== KL divergence statistics ======");
  const auto kl = mean_and_uncertainty(k.sum_kld, k.sum_kld2, k.count);
  line(fmt::format("Mean    KLD: {:10.6f} ± {:10.6f}", kl.first, kl.second));
  const auto& kv = k.kld_values;
  line(fmt::format("Maximum KLD: {:10.6f}", kv.back()));
  for (const auto& [name, f] : {std::pair{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}})
    line(fmt::format("{}   KLD: {:10.6f}", name, percentile(kv, f)));
  line(fmt::format("Median  KLD: {:10.6f}", median(kv)));
  for (const auto& [name, f] : {std::pair{"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}})
    line(fmt::format("{}   KLD: {:10.6f}", name, percentile(kv, f)));
  line(fmt::format("Minimum KLD: {:10.6f}", kv.front()));
  line("");
  line("====== Token probability statistics ======");
  const auto p_diff = mean_and_uncertainty(k.sum_p_diff, k.sum_p_diff2, k.count);
  line(fmt::format("Mean    Δp: {:6.3f} ± {:5.3f} %", 100.0 * p_diff.first, 100.0 * p_diff.second));
  const auto& pv = k.p_diff_values;
  line(fmt::format("Maximum Δp: {:6.3f}%", 100.0 * pv.back()));
  for (const auto& [name, f] :
       {std::pair{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}, {"75.0%", 0.750f}})
    line(fmt::format("{}   Δp: {:6.3f}%", name, 100.0 * percentile(pv, f)));
  line(fmt::format("Median  Δp: {:6.3f}%", 100.0 * median(pv)));
  for (const auto& [name, f] :
       {std::pair{"25.0%", 0.250f}, {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}})
    line(fmt::format("{}   Δp: {:6.3f}%", name, 100.0 * percentile(pv, f)));
  line(fmt::format("Minimum Δp: {:6.3f}%", 100.0 * pv.front()));
  const auto mse = mean_and_uncertainty(k.sum_p_diff2, k.sum_p_diff4, k.count);
  const double rms = std::sqrt(mse.first);
  line(fmt::format("RMS Δp    : {:6.3f} ± {:5.3f} %", 100.0 * rms, 100.0 * 0.5 / rms * mse.second));
  const double same = double(k.n_same_top) / double(k.count);
  line(fmt::format("Same top p: {:6.3f} ± {:5.3f} %", 100.0 * same,
                   100.0 * std::sqrt(same * (1.0 - same) / double(k.count - 1))));
  return out;
}

}  // namespace ggtrain::eval
