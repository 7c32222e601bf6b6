// The run config as text: the table of keys (one row per config key: how
// it is parsed, printed and what kind of value it takes), TOML documents,
// `--set section.key=value` overrides, and the resolved config written back
// as TOML (saved with the run and in every state file).
#include <fmt/format.h>

#include <toml++/toml.h>
#include <array>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <type_traits>
#include <variant>

#include "chat/template.h"
#include "gguf/ollama_store.h"
#include "train/run_config.h"
#include "util/error.h"
#include "util/suggest.h"
#include "util/utf8.h"

namespace ggtrain::train {

namespace {

// The TOML value type a key takes (a float key also takes an integer).
enum class Kind { Int, Float, Bool, String, List, Sources, Tasks };

// One entry per config key: how to read it from text and write it as TOML.
struct Key {
  std::string name;  // "section.key"
  std::function<void(RunConfig&, const std::string&)> set;
  std::function<std::string(const RunConfig&)> get;  // TOML literal
  Kind kind;
  const char* doc;  // one line for `ggtrain config show`
};

int64_t parse_int(const std::string& key, const std::string& v) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size()) fail("config: {} must be an integer, got '{}'", key, v);
  return x;
}

double parse_float(const std::string& key, const std::string& v) {
  try {
    size_t used = 0;
    double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  fail("config: {} must be a number, got '{}'", key, v);
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "true") return true;
  if (v == "false") return false;
  fail("config: {} must be true or false, got '{}'", key, v);
}

std::string quote(const std::string& s) {
  std::ostringstream os;
  os << toml::value<std::string>(s);
  return os.str();
}

template <typename T>
Key int_key(const std::string& name, T RunConfig::*sec, int64_t T::*field, const char* doc) {
  return {name, [=](RunConfig& c, const std::string& v) { (c.*sec).*field = parse_int(name, v); },
          [=](const RunConfig& c) { return std::to_string((c.*sec).*field); }, Kind::Int, doc};
}

// A TOML float literal that reads back as the same double: "{}" prints the
// shortest round-trip digits, but 10000 or -0 would read back as integers
// (and -0 as +0), so a fraction is added when the digits have none.
std::string float_literal(double v) {
  std::string t = fmt::format("{}", v);
  if (t.find_first_of(".eEni") == std::string::npos) t += ".0";
  return t;
}

template <typename T>
Key float_key(const std::string& name, T RunConfig::*sec, double T::*field, const char* doc) {
  return {name, [=](RunConfig& c, const std::string& v) { (c.*sec).*field = parse_float(name, v); },
          [=](const RunConfig& c) { return float_literal((c.*sec).*field); }, Kind::Float, doc};
}

template <typename T>
Key bool_key(const std::string& name, T RunConfig::*sec, bool T::*field, const char* doc) {
  return {name, [=](RunConfig& c, const std::string& v) { (c.*sec).*field = parse_bool(name, v); },
          [=](const RunConfig& c) { return std::string((c.*sec).*field ? "true" : "false"); }, Kind::Bool, doc};
}

// String values must be UTF-8: the resolved config is saved as TOML (with
// the run and in every checkpoint), and TOML cannot hold other bytes, so a
// path in another encoding would come back changed on --resume (the input
// is kept in fuzz/regressions/config/).
template <typename T>
Key string_key(const std::string& name, T RunConfig::*sec, std::string T::*field, const char* doc) {
  return {name,
          [=](RunConfig& c, const std::string& v) {
            if (!valid_utf8(v))
              fail("config: {} must be UTF-8 text (the config is saved as TOML), got bytes that are not", name);
            (c.*sec).*field = v;
          },
          [=](const RunConfig& c) { return quote((c.*sec).*field); }, Kind::String, doc};
}

// A model GGUF of the init table: "ollama:NAME[:TAG]" is resolved at once to
// the blob in ollama's store (gguf/ollama_store.h), so the saved config
// names the exact file the run started from.
Key model_path_key(const std::string& name, std::string InitSection::*field, const char* doc) {
  Key k = string_key(name, &RunConfig::init, field, doc);
  auto set_text = k.set;
  k.set = [=](RunConfig& c, const std::string& v) {
    set_text(c, v);
    try {
      c.init.*field = gguf::resolve_model_path(v);
    } catch (const Error& e) {
      fail("config: {}: {}", name, e.what());
    }
  };
  return k;
}

// A choice option: one of a few names, held in the config as its enum (read
// once, here; the run compares enums). One table per enum, also behind
// option_name().
template <typename E>
struct Choice {
  E value;
  std::string_view name;
};
constexpr std::array<Choice<DataFormat>, 6> kDataFormats{{{DataFormat::kText, "text"},
                                                          {DataFormat::kChat, "chat"},
                                                          {DataFormat::kAlpaca, "alpaca"},
                                                          {DataFormat::kCompletion, "completion"},
                                                          {DataFormat::kAuto, "auto"},
                                                          {DataFormat::kPreference, "preference"}}};
constexpr std::array<Choice<AttentionSpan>, 2> kAttentionSpans{
    {{AttentionSpan::kCausal, "causal"}, {AttentionSpan::kDocument, "document"}}};
constexpr std::array<Choice<corpus::FileType>, 4> kFileTypes{{{corpus::FileType::kText, "text"},
                                                              {corpus::FileType::kJsonl, "jsonl"},
                                                              {corpus::FileType::kLlmc, "llmc"},
                                                              {corpus::FileType::kNanoGpt, "nanogpt"}}};
constexpr std::array<Choice<corpus::DocSeparator>, 3> kDocSeparators{{{corpus::DocSeparator::kLine, "line"},
                                                                      {corpus::DocSeparator::kBlankLine, "blank_line"},
                                                                      {corpus::DocSeparator::kFile, "file"}}};
constexpr std::array<Choice<corpus::OnBadDocument>, 2> kOnBadDocuments{
    {{corpus::OnBadDocument::kError, "error"}, {corpus::OnBadDocument::kSkip, "skip"}}};
constexpr std::array<Choice<corpus::Overflow>, 3> kOverflows{{{corpus::Overflow::kTruncate, "truncate"},
                                                              {corpus::Overflow::kSplit, "split"},
                                                              {corpus::Overflow::kSkip, "skip"}}};
constexpr std::array<Choice<optim::ScheduleKind>, 3> kSchedules{{{optim::ScheduleKind::Cosine, "cosine"},
                                                                 {optim::ScheduleKind::Constant, "constant"},
                                                                 {optim::ScheduleKind::Wsd, "wsd"}}};
constexpr std::array<Choice<NonfinitePolicy>, 2> kNonfinitePolicies{
    {{NonfinitePolicy::kStop, "stop"}, {NonfinitePolicy::kSkip, "skip"}}};
constexpr std::array<Choice<model::Recompute>, 3> kRecomputes{
    {{model::Recompute::kNone, "none"}, {model::Recompute::kAttn, "attn"}, {model::Recompute::kAll, "all"}}};
constexpr std::array<Choice<model::Precision>, 2> kPrecisions{
    {{model::Precision::kFp32, "fp32"}, {model::Precision::kBf16, "bf16"}}};
constexpr std::array<Choice<Objective>, 7> kObjectives{{{Objective::kSft, "sft"},
                                                        {Objective::kDpo, "dpo"},
                                                        {Objective::kIpo, "ipo"},
                                                        {Objective::kOrpo, "orpo"},
                                                        {Objective::kSimpo, "simpo"},
                                                        {Objective::kDistill, "distill"},
                                                        {Objective::kGrpo, "grpo"}}};
constexpr std::array<Choice<Divergence>, 2> kDivergences{
    {{Divergence::kForward, "forward"}, {Divergence::kReverse, "reverse"}}};

template <typename E, size_t N>
std::string_view name_in(const std::array<Choice<E>, N>& choices, E value) {
  for (const auto& c : choices)
    if (c.value == value) return c.name;
  fail("config: no name for option value {}", int(value));
}

// "a, b or c"
template <typename E, size_t N>
std::string names_of(const std::array<Choice<E>, N>& choices) {
  std::string s;
  for (size_t i = 0; i < N; ++i) s += fmt::format("{}{}", i == 0 ? "" : i + 1 == N ? " or " : ", ", choices[i].name);
  return s;
}

// The value named `v`, or nullptr.
template <typename E, size_t N>
const E* value_named(const std::array<Choice<E>, N>& choices, const std::string& v) {
  for (const auto& choice : choices)
    if (choice.name == v) return &choice.value;
  return nullptr;
}

// " (did you mean 'x'?)" for a misspelt choice.
template <typename E, size_t N>
std::string closest_choice(const std::array<Choice<E>, N>& choices, const std::string& v) {
  std::vector<std::string> names;
  for (const auto& c : choices) names.emplace_back(c.name);
  return did_you_mean(v, names);
}

template <typename E, size_t N>
E parse_choice(const std::string& name, const std::string& v, const std::array<Choice<E>, N>& choices) {
  const E* value = value_named(choices, v);
  if (!value) fail("config: {} must be {}, got \"{}\"{}", name, names_of(choices), v, closest_choice(choices, v));
  return *value;
}

template <typename T, typename E, size_t N>
Key choice_key(const std::string& name, T RunConfig::*sec, E T::*field, const std::array<Choice<E>, N>& choices,
               const char* doc) {
  return {name, [=](RunConfig& c, const std::string& v) { (c.*sec).*field = parse_choice(name, v, choices); },
          [=](const RunConfig& c) { return quote(std::string(name_in(choices, (c.*sec).*field))); }, Kind::String, doc};
}

// A choice option that may be left unset: "" (nullopt) means `unset`.
template <typename T, typename E, size_t N>
Key optional_choice_key(const std::string& name, T RunConfig::*sec, std::optional<E> T::*field,
                        const std::array<Choice<E>, N>& choices, const char* unset, const char* doc) {
  return {name,
          [=](RunConfig& c, const std::string& v) {
            const E* value = value_named(choices, v);
            if (!value && !v.empty())
              fail("config: {} must be {} (or \"\": {}), got \"{}\"{}", name, names_of(choices), unset, v,
                   closest_choice(choices, v));
            (c.*sec).*field = value ? std::optional<E>(*value) : std::nullopt;
          },
          [=](const RunConfig& c) {
            const std::optional<E>& value = (c.*sec).*field;
            return quote(value ? std::string(name_in(choices, *value)) : std::string());
          },
          Kind::String, doc};
}

// A list of names: a TOML array of strings, or through --set the names
// separated by commas ("token_embd,blk.0-3") or that array as a config file
// and `config show` write it ('["attn_q", "attn_v"]').
std::vector<std::string> parse_list(const std::string& key, const std::string& v) {
  if (!valid_utf8(v)) fail("config: {} must be UTF-8 text (the config is saved as TOML), got bytes that are not", key);
  std::vector<std::string> out;
  if (const size_t first = v.find_first_not_of(" \t"); first != std::string::npos && v[first] == '[') {
    toml::table t;
    try {
      t = toml::parse("list = " + v);
    } catch (const toml::parse_error& e) {
      fail("config: {}: '{}' is not a TOML array of strings ({}); or write the names separated by commas", key, v,
           e.description());
    }
    const toml::array* items = t["list"].as_array();
    if (!items) fail("config: {}: '{}' is not a TOML array of strings", key, v);
    for (const auto& item : *items) {
      if (!item.is_string()) fail("config: {}: '{}' holds something that is not a string", key, v);
      out.push_back(*item.value<std::string>());
    }
    return out;
  }
  for (size_t pos = 0; pos <= v.size();) {
    size_t end = v.find(',', pos);
    if (end == std::string::npos) end = v.size();
    std::string item = v.substr(pos, end - pos);
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
    pos = end + 1;
  }
  return out;
}

std::string list_literal(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const auto& x : names) q.push_back(quote(x));
  return fmt::format("[{}]", fmt::join(q, ", "));
}

template <typename T>
Key list_key(const std::string& name, T RunConfig::*sec, std::vector<std::string> T::*field, const char* doc) {
  return {name, [=](RunConfig& c, const std::string& v) { (c.*sec).*field = parse_list(name, v); },
          [=](const RunConfig& c) { return list_literal((c.*sec).*field); }, Kind::List, doc};
}

// data.sources as --set writes it: "PATH@WEIGHT,PATH@WEIGHT" (weight 1
// when "@WEIGHT" is left out).
std::vector<DataSection::Source> parse_sources(const std::string& key, const std::string& v) {
  std::vector<DataSection::Source> out;
  for (const auto& item : parse_list(key, v)) {
    const size_t at = item.rfind('@');
    DataSection::Source s{item.substr(0, at), 1.0};
    if (at != std::string::npos) s.weight = parse_float(key + " weight of " + s.path, item.substr(at + 1));
    if (s.path.empty()) fail("config: {}: a source without a path ('{}')", key, item);
    if (!(s.weight > 0)) fail("config: {}: the weight of {} must be positive, got {}", key, s.path, s.weight);
    out.push_back(s);
  }
  return out;
}

std::string sources_literal(const std::vector<DataSection::Source>& sources) {
  std::vector<std::string> items;
  for (const auto& s : sources)
    items.push_back(fmt::format("{{path = {}, weight = {}}}", quote(s.path), float_literal(s.weight)));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

std::string sources_text(const toml::array& a, const Key& key, const std::string& source) {
  std::vector<std::string> items;
  for (const auto& e : a) {
    const auto* t = e.as_table();
    const auto* path = t ? t->get_as<std::string>("path") : nullptr;
    if (!path) fail("{}: {} must be an array of {{path = \"...\", weight = number}} tables", source, key.name);
    double weight = 1.0;
    if (const auto* w = t->get("weight")) {
      if (auto f = w->value<double>()) weight = *f;
      else fail("{}: {}: the weight of {} must be a number", source, key.name, path->get());
    }
    for (const auto& [k, v] : *t)
      if (k.str() != "path" && k.str() != "weight")
        fail("{}: {}: unknown field '{}' (path, weight)", source, key.name, std::string(k.str()));
    if (path->get().find_first_of(",@") != std::string::npos)
      fail("{}: {}: '{}' holds ',' or '@', which data.sources paths cannot", source, key.name, path->get());
    items.push_back(fmt::format("{}@{}", path->get(), weight));
  }
  return fmt::format("{}", fmt::join(items, ","));
}

// train.eval_tasks as --set writes it: "PATH[@format=F][@every=N][@limit=N],...".
std::vector<TrainSection::EvalTask> parse_tasks(const std::string& key, const std::string& v) {
  std::vector<TrainSection::EvalTask> out;
  for (const auto& item : parse_list(key, v)) {
    size_t at = item.find('@');
    TrainSection::EvalTask t;
    t.path = item.substr(0, at);
    if (t.path.empty()) fail("config: {}: a task without a path ('{}')", key, item);
    while (at != std::string::npos) {
      const size_t next = item.find('@', at + 1);
      const std::string field = item.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
      const size_t eq = field.find('=');
      const std::string name = field.substr(0, eq), value = eq == std::string::npos ? "" : field.substr(eq + 1);
      const std::string where = fmt::format("{} {} of {}", key, name, t.path);
      if (eq == std::string::npos) fail("config: {}: '{}' is not field=value (format, every, limit)", key, field);
      if (name == "format") t.format = value;
      else if (name == "every") t.every = parse_int(where, value);
      else if (name == "limit") t.limit = parse_int(where, value);
      else fail("config: {}: unknown field '{}' of {} (format, every, limit)", key, name, t.path);
      if ((name == "every" && t.every < 0) || (name == "limit" && t.limit < 0))
        fail("config: {} must be >= 0, got {}", where, value);
      at = next;
    }
    out.push_back(t);
  }
  return out;
}

// A task with only a path is written as its path, as older configs hold it.
std::string tasks_literal(const std::vector<TrainSection::EvalTask>& tasks) {
  std::vector<std::string> items;
  for (const auto& t : tasks) {
    std::vector<std::string> fields{"path = " + quote(t.path)};
    if (!t.format.empty()) fields.push_back("format = " + quote(t.format));
    if (t.every >= 0) fields.push_back(fmt::format("every = {}", t.every));
    if (t.limit >= 0) fields.push_back(fmt::format("limit = {}", t.limit));
    items.push_back(fields.size() == 1 ? quote(t.path) : fmt::format("{{{}}}", fmt::join(fields, ", ")));
  }
  return fmt::format("[{}]", fmt::join(items, ", "));
}

// A TOML array of task paths or {path, format, every, limit} tables, as
// parse_tasks' text.
std::string tasks_text(const toml::array& a, const Key& key, const std::string& source) {
  std::vector<std::string> items;
  const auto plain = [&](const std::string& text, const char* what) {
    if (text.find_first_of(",@") != std::string::npos)
      fail("{}: {}: {} '{}' holds ',' or '@', which train.eval_tasks entries cannot", source, key.name, what, text);
    return text;
  };
  for (const auto& e : a) {
    if (const auto* str = e.as_string()) {
      items.push_back(plain(str->get(), "the path"));
      continue;
    }
    const auto* t = e.as_table();
    const auto* path = t ? t->get_as<std::string>("path") : nullptr;
    if (!path)
      fail("{}: {} must be an array of task paths or {{path = \"...\", format, every, limit}} tables", source,
           key.name);
    std::string item = plain(path->get(), "the path");
    for (const auto& [k, v] : *t) {
      const std::string name(k.str());
      if (name == "path") continue;
      if (name == "format" && v.as_string()) item += "@format=" + plain(v.as_string()->get(), "the format");
      else if ((name == "every" || name == "limit") && v.as_integer())
        item += fmt::format("@{}={}", name, v.as_integer()->get());
      else if (name == "format" || name == "every" || name == "limit")
        fail("{}: {}: the {} of {} must be {}", source, key.name, name, path->get(),
             name == "format" ? "a string" : "an integer");
      else fail("{}: {}: unknown field '{}' (path, format, every, limit)", source, key.name, name);
    }
    items.push_back(item);
  }
  return fmt::format("{}", fmt::join(items, ","));
}

// model.<name> for each of model::config_fields().
std::vector<Key> model_keys() {
  std::vector<Key> k;
  for (const auto& f : model::config_fields()) {
    const std::string name = std::string("model.") + f.name;
    k.push_back(std::visit(
        [&](auto member) -> Key {
          using Member = decltype(member);
          if constexpr (std::is_same_v<Member, int64_t model::Config::*>)
            return int_key(name, &RunConfig::model, member, f.doc);
          else if constexpr (std::is_same_v<Member, bool model::Config::*>)
            return bool_key(name, &RunConfig::model, member, f.doc);
          else if constexpr (std::is_same_v<Member, std::string model::Config::*>)
            return string_key(name, &RunConfig::model, member, f.doc);
          else return float_key(name, &RunConfig::model, member, f.doc);
        },
        f.member));
  }
  return k;
}

// Every config key but the model section's (model_keys() derives those from
// model::config_fields): one row each, so the function is as long as the list.
const std::vector<Key>& keys() {
  using D = DataSection;
  using T = TrainSection;
  using G = GrpoSection;
  using K = CheckpointSection;
  using I = InitSection;
  static const std::string chat_template_doc = "auto (the base model's, else chatml) or " + chat::template_names_text();
  static const std::vector<Key> k = [] {
    std::vector<Key> all = model_keys();
    const std::vector<Key> rest = {
        list_key("data.corpus", &RunConfig::data, &D::corpus,
                 "training text: files, folders (recursive) or globs; .txt, .jsonl/.json, also .gz/.zst"),
        list_key("data.val_corpus", &RunConfig::data, &D::val_corpus,
                 "a separate validation set; empty: data.val_fraction of the corpus is held out"),
        {"data.sources", [](RunConfig& c, const std::string& v) { c.data.sources = parse_sources("data.sources", v); },
         [](const RunConfig& c) { return sources_literal(c.data.sources); }, Kind::Sources,
         "a mixture instead of data.corpus: [{path, weight}], windows drawn in proportion to the weights"},
        optional_choice_key("data.file_type", &RunConfig::data, &D::file_type, kFileTypes, "by extension",
                            "\"\" (by extension), text, jsonl, or pretokenized llmc / nanogpt (.bin)"),
        choice_key("data.doc_separator", &RunConfig::data, &D::doc_separator, kDocSeparators,
                   "text files: a document per line, per blank_line-separated block, or per file"),
        string_key("data.text_key", &RunConfig::data, &D::text_key,
                   "JSONL: the member that holds each document's text"),
        choice_key("data.on_bad_document", &RunConfig::data, &D::on_bad_document, kOnBadDocuments,
                   "invalid UTF-8 or JSON: error (stop, naming file and line) or skip (counted)"),
        bool_key("data.add_bos", &RunConfig::data, &D::add_bos, "each document starts with BOS"),
        bool_key("data.add_eos", &RunConfig::data, &D::add_eos, "each document ends with EOS"),
        int_key("data.shard_tokens", &RunConfig::data, &D::shard_tokens, "training tokens per prepared shard file"),
        int_key("data.tokenizer_sample_lines", &RunConfig::data, &D::tokenizer_sample_lines,
                "lines sampled from the corpus to train a tokenizer on"),
        string_key("data.tokenizer", &RunConfig::data, &D::tokenizer,
                   "a sentencepiece .model, a .gguf whose vocabulary to use, or a Hugging Face tokenizer.json (its "
                   "tokenizer_config.json beside it); empty: train one on the corpus"),
        int_key("data.vocab_size", &RunConfig::data, &D::vocab_size,
                "pieces of the tokenizer trained on the corpus (raised if the text has more characters)"),
        float_key("data.val_fraction", &RunConfig::data, &D::val_fraction,
                  "share of documents held out for validation, in [0, 0.5)"),
        choice_key("data.format", &RunConfig::data, &D::format, kDataFormats,
                   "text (pretraining), chat, alpaca, completion (answer-only loss), auto (detected per file), or "
                   "preference (chosen/rejected pairs)"),
        string_key("data.chat_template", &RunConfig::data, &D::chat_template, chat_template_doc.c_str()),
        choice_key("data.overflow", &RunConfig::data, &D::overflow, kOverflows,
                   "an example longer than train.seq_len: truncate, split or skip (counted)"),
        choice_key("data.attention", &RunConfig::data, &D::attention, kAttentionSpans,
                   "causal (windows attend across documents) or document (within each document)"),
        int_key("train.steps", &RunConfig::train, &T::steps,
                "optimizer steps of the whole run (the schedule's length)"),
        float_key("train.epochs", &RunConfig::train, &T::epochs,
                  "passes over the training tokens, made train.steps once the data is prepared (0: train.steps; "
                  "init.from with neither set: 3 of records, 1 of text)"),
        int_key("train.batch", &RunConfig::train, &T::batch,
                "sequences per micro-batch (under mpirun: the global micro-batch)"),
        int_key("train.seq_len", &RunConfig::train, &T::seq_len,
                "tokens per sequence (at most model.ctx, unless some layers are recurrent)"),
        int_key("train.grad_accum", &RunConfig::train, &T::grad_accum,
                "micro-batches per step (tokens per step = batch x seq_len x grad_accum)"),
        float_key("train.lr_max", &RunConfig::train, &T::lr_max, "peak learning rate, reached after the warmup"),
        float_key("train.lr_min", &RunConfig::train, &T::lr_min,
                  "learning rate at the end of the schedule (-1: a tenth of lr_max)"),
        int_key("train.warmup_steps", &RunConfig::train, &T::warmup_steps, "steps of linear warmup from 0 to lr_max"),
        choice_key("train.schedule", &RunConfig::train, &T::schedule, kSchedules,
                   "cosine, constant or wsd (warmup-stable-decay)"),
        float_key("train.weight_decay", &RunConfig::train, &T::weight_decay,
                  "AdamW decoupled weight decay (matrices only)"),
        float_key("train.beta1", &RunConfig::train, &T::beta1, "AdamW first-moment decay"),
        float_key("train.beta2", &RunConfig::train, &T::beta2, "AdamW second-moment decay"),
        float_key("train.eps", &RunConfig::train, &T::eps, "AdamW epsilon"),
        float_key("train.grad_clip", &RunConfig::train, &T::grad_clip, "global gradient-norm clip; 0 off"),
        {"train.seed",
         [](RunConfig& c, const std::string& v) {
           int64_t s = parse_int("train.seed", v);
           if (s < 0) fail("config: train.seed must be >= 0, got {}", s);
           c.train.seed = uint64_t(s);
         },
         [](const RunConfig& c) { return std::to_string(int64_t(c.train.seed & 0x7fffffffffffffffULL)); }, Kind::Int,
         "seed of the initial weights, the batch order and the samples"},
        int_key("train.threads", &RunConfig::train, &T::threads, "threads; 0 uses every core"),
        int_key("train.eval_every", &RunConfig::train, &T::eval_every,
                "validation loss every N steps (and at the end); 0 off"),
        int_key("train.eval_batches", &RunConfig::train, &T::eval_batches, "validation batches per evaluation"),
        {"train.eval_tasks",
         [](RunConfig& c, const std::string& v) { c.train.eval_tasks = parse_tasks("train.eval_tasks", v); },
         [](const RunConfig& c) { return tasks_literal(c.train.eval_tasks); }, Kind::Tasks,
         "multiple-choice task files scored as `ggtrain eval --task` scores them: paths or {path, format, every, "
         "limit} tables (--set: PATH@every=N@limit=N)"},
        int_key("train.eval_tasks_every", &RunConfig::train, &T::eval_tasks_every,
                "score a train.eval_tasks file without its own `every` every N steps (and at the end); 0 off"),
        int_key("train.eval_tasks_limit", &RunConfig::train, &T::eval_tasks_limit,
                "tasks drawn from a file without its own `limit` as `eval --tasks N` draws them; 0 all"),
        int_key("train.sample_every", &RunConfig::train, &T::sample_every,
                "print a generated sample every N steps; 0 off"),
        int_key("train.sample_tokens", &RunConfig::train, &T::sample_tokens, "tokens per printed sample"),
        choice_key("train.on_nonfinite", &RunConfig::train, &T::on_nonfinite, kNonfinitePolicies,
                   "a NaN/Inf loss or gradient: stop (keep the last checkpoint) or skip the update"),
        int_key("train.max_nonfinite", &RunConfig::train, &T::max_nonfinite,
                "with skip: stop after this many non-finite steps in a row"),
        int_key("train.zero", &RunConfig::train, &T::zero,
                "under mpirun: 1 shards the AdamW moments over the ranks (ZeRO-1)"),
        choice_key("train.recompute", &RunConfig::train, &T::recompute, kRecomputes,
                   "activations recomputed in backward to save memory: none, attn or all"),
        choice_key("train.precision", &RunConfig::train, &T::precision, kPrecisions,
                   "fp32, or bf16 (bf16 GEMM inputs, float master weights and optimizer)"),
        string_key("train.qat", &RunConfig::train, &T::qat,
                   "quantization-aware training: a type export writes (q4_k_m, q4_0, ...); each step's forward "
                   "sees the weights as that export stores them, the gradient updates the float masters; empty off"),
        string_key("train.qat_imatrix", &RunConfig::train, &T::qat_imatrix,
                   "with train.qat: an importance matrix (ggtrain imatrix, llama-imatrix) the forward quantizes "
                   "against, as export --imatrix of the same file will; empty none"),
        int_key("train.qat_every", &RunConfig::train, &T::qat_every,
                "with train.qat: new blocks every N steps, the steps between use the masters plus the last blocks' "
                "rounding errors (1: every step)"),
        float_key("train.router_aux_loss_coef", &RunConfig::train, &T::router_aux_loss_coef,
                  "qwen3moe, olmoe: weight of the experts' load-balancing loss (-1: the family's, 0.001 and 0.01; "
                  "0 off)"),
        float_key("train.memory_limit", &RunConfig::train, &T::memory_limit,
                  "GiB a run may plan for (weights, gradients, AdamW moments, activations); 0: MemAvailable"),
        choice_key("train.objective", &RunConfig::train, &T::objective, kObjectives,
                   "sft, distill (from train.teacher), grpo (rewards of sampled replies), or on data.format = "
                   "\"preference\" pairs: dpo, ipo, orpo or simpo"),
        string_key("train.teacher", &RunConfig::train, &T::teacher,
                   "distill: the teacher GGUF (any type; the student's vocabulary, or one that extends it)"),
        int_key("train.distill.top_k", &RunConfig::train, &T::distill_top_k,
                "distill: the teacher's most likely tokens kept per position (the rest of its mass is one bucket)"),
        {"train.distill.temperature",
         [](RunConfig& c, const std::string& v) {
           c.train.distill.temperature = parse_float("train.distill.temperature", v);
         },
         [](const RunConfig& c) { return float_literal(c.train.distill.temperature); }, Kind::Float,
         "distill: the softmax temperature of teacher and student (the KL is scaled by its square)"},
        {"train.distill.alpha",
         [](RunConfig& c, const std::string& v) { c.train.distill.alpha = parse_float("train.distill.alpha", v); },
         [](const RunConfig& c) { return float_literal(c.train.distill.alpha); }, Kind::Float,
         "distill: the weight of the hard-label loss, in [0, 1] (0: pure distillation)"},
        {"train.distill.loss",
         [](RunConfig& c, const std::string& v) {
           c.train.distill.divergence = parse_choice(std::string("train.distill.loss"), v, kDivergences);
         },
         [](const RunConfig& c) { return quote(std::string(name_in(kDivergences, c.train.distill.divergence))); },
         Kind::String, "distill: forward (KL(teacher || student), Hinton) or reverse (KL(student || teacher))"},
        string_key("train.grpo.reward", &RunConfig::grpo, &G::reward,
                   "grpo: exact, number, choice, regex:PATTERN or cmd:COMMAND (docs/guide.md)"),
        float_key("train.grpo.reward_timeout", &RunConfig::grpo, &G::reward_timeout,
                  "grpo: seconds a cmd: reward may take for one step's rollouts"),
        int_key("train.grpo.group", &RunConfig::grpo, &G::group, "grpo: replies sampled per prompt (>= 2)"),
        int_key("train.grpo.max_tokens", &RunConfig::grpo, &G::max_tokens, "grpo: the longest reply, in tokens"),
        float_key("train.grpo.temperature", &RunConfig::grpo, &G::temperature, "grpo: the sampler's temperature"),
        float_key("train.grpo.top_p", &RunConfig::grpo, &G::top_p, "grpo: the sampler's top-p (1: off)"),
        int_key("train.grpo.top_k", &RunConfig::grpo, &G::top_k, "grpo: the sampler's top-k (0: off)"),
        float_key("train.grpo.min_p", &RunConfig::grpo, &G::min_p, "grpo: the sampler's min-p (0: off)"),
        float_key("train.grpo.epsilon", &RunConfig::grpo, &G::epsilon, "grpo: the policy ratio's clip range"),
        float_key("train.grpo.epsilon_high", &RunConfig::grpo, &G::epsilon_high,
                  "grpo: the upper clip range (DAPO's 0.28); < 0: train.grpo.epsilon"),
        float_key("train.grpo.beta", &RunConfig::grpo, &G::beta,
                  "grpo: the KL penalty to init.from's weights (0: none)"),
        bool_key("train.grpo.scale_rewards", &RunConfig::grpo, &G::scale_rewards,
                 "grpo: divide each advantage by its group's reward std"),
        int_key("train.grpo.iterations", &RunConfig::grpo, &G::iterations,
                "grpo: optimisation steps per batch of sampled replies (TRL's num_iterations)"),
        float_key("train.beta", &RunConfig::train, &T::beta,
                  "DPO/IPO/SimPO beta, ORPO lambda (TRL's beta; SimPO usually 2.0-2.5)"),
        float_key("train.label_smoothing", &RunConfig::train, &T::label_smoothing,
                  "DPO/SimPO: the share of pairs assumed mislabelled (conservative DPO), in [0, 0.5)"),
        float_key("train.simpo_gamma", &RunConfig::train, &T::simpo_gamma, "SimPO's target reward margin gamma"),
        list_key("train.freeze", &RunConfig::train, &T::freeze,
                 "tensors that keep their values, e.g. [\"token_embd\", \"blk.0-3\", \"attn_norm\"]"),
        {"train.lora.rank",
         [](RunConfig& c, const std::string& v) { c.train.lora.rank = parse_int("train.lora.rank", v); },
         [](const RunConfig& c) { return std::to_string(c.train.lora.rank); }, Kind::Int,
         "LoRA rank; > 0 trains adapters on a frozen init.from base"},
        {"train.lora.alpha",
         [](RunConfig& c, const std::string& v) { c.train.lora.alpha = parse_float("train.lora.alpha", v); },
         [](const RunConfig& c) { return float_literal(c.train.lora.alpha); }, Kind::Float,
         "LoRA scale numerator: W + (alpha / rank) B A"},
        {"train.lora.targets",
         [](RunConfig& c, const std::string& v) { c.train.lora.targets = parse_list("train.lora.targets", v); },
         [](const RunConfig& c) { return list_literal(c.train.lora.targets); }, Kind::List,
         "block matrices that get adapters: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down"},
        int_key("checkpoint.every", &RunConfig::checkpoint, &K::every,
                "write weights/step_N.gguf every N steps (and at the end); 0: only at the end"),
        int_key("checkpoint.keep_last", &RunConfig::checkpoint, &K::keep_last,
                "checkpoints kept (older ones deleted); 0 keeps all"),
        string_key("checkpoint.keep_best", &RunConfig::checkpoint, &K::keep_best,
                   "weights/best.gguf follows the best evaluation: val_loss, bpb or task:NAME (a train.eval_tasks "
                   "file's acc_norm); empty: off"),
        bool_key("checkpoint.imatrix", &RunConfig::checkpoint, &K::imatrix,
                 "at the end, write imatrix.gguf: llama-imatrix's statistics of the final weights over the run's "
                 "validation tokens (for export --imatrix)"),
        string_key("init.donor", &RunConfig::init, &I::donor,
                   "a model GGUF whose frozen token embedding warm-starts a new model through a trained lens"),
        model_path_key("init.from", &I::from,
                       "a GGUF to continue training (finetune): shape, vocabulary and weights come from it; "
                       "ollama:NAME[:TAG] names one in ollama's store"),
    };
    all.insert(all.end(), rest.begin(), rest.end());
    return all;
  }();
  return k;
}

const Key& find_key(const std::string& name, const std::string& source) {
  std::vector<std::string> names;
  for (const auto& k : keys()) {
    if (k.name == name) return k;
    names.push_back(k.name);
  }
  fail("{}: unknown config key '{}'{}; `ggtrain config show` lists every key", source, name, did_you_mean(name, names));
}

const char* kind_text(Kind k) {
  switch (k) {
    case Kind::Int: return "an integer";
    case Kind::Float: return "a number";
    case Kind::Bool: return "true or false";
    case Kind::String: return "a string";
    case Kind::List: return "an array of strings";
    case Kind::Sources: return "an array of {path = \"...\", weight = number} tables";
    case Kind::Tasks: return "an array of task paths or {path = \"...\", format, every, limit} tables";
  }
  return "?";
}

// A TOML value as the text the key's parser takes; a value of the wrong
// TOML type (`steps = "10"`, `tied = 1`, `corpus = 5`) is an error naming
// the key, the type it needs and the value it got.
std::string node_text(const toml::node& n, const Key& key, const std::string& source) {
  std::string got;
  if (auto v = n.as_string()) {
    // A list key also takes one string (`corpus = "kjv.txt"`, as older
    // configs hold it), split at commas like --set.
    if (key.kind == Kind::String || key.kind == Kind::List || key.kind == Kind::Tasks) return v->get();
    got = "the string " + quote(v->get());
  } else if (auto v = n.as_integer()) {
    if (key.kind == Kind::Int || key.kind == Kind::Float) return std::to_string(v->get());
    got = fmt::format("the integer {}", v->get());
  } else if (auto v = n.as_floating_point()) {
    if (key.kind == Kind::Float) return fmt::format("{}", v->get());
    got = fmt::format("the number {}", v->get());
  } else if (auto v = n.as_boolean()) {
    if (key.kind == Kind::Bool) return v->get() ? "true" : "false";
    got = v->get() ? "true" : "false";
  } else if (auto a = n.as_array(); a && key.kind == Kind::Sources) {
    return sources_text(*a, key, source);
  } else if (auto a = n.as_array(); a && key.kind == Kind::Tasks) {
    return tasks_text(*a, key, source);
  } else if (auto a = n.as_array(); a && key.kind == Kind::List) {
    std::vector<std::string> items;
    for (const auto& e : *a) {
      const auto* str = e.as_string();
      if (!str) {
        std::ostringstream os;
        os << e.type();
        fail("{}: {} must be an array of strings, got an array holding a TOML {}", source, key.name, os.str());
      }
      if (str->get().find(',') != std::string::npos)
        fail("{}: {}: '{}' is not a name (names hold no commas)", source, key.name, str->get());
      items.push_back(str->get());
    }
    return fmt::format("{}", fmt::join(items, ","));
  } else {
    std::ostringstream os;
    os << n.type();
    got = "a TOML " + os.str();
  }
  fail("{}: {} must be {}, got {}", source, key.name, kind_text(key.kind), got);
}

// toml++ 3.3.0 (Debian 12) reaches __builtin_unreachable() when it asks
// whether certain non-ASCII code points are whitespace, which it does for a
// non-ASCII character in a key, after a value or after a line-ending
// backslash in a multi-line string (marzer/tomlplusplus#190; found here by
// fuzz/config.cpp, inputs in fuzz/regressions/config/). Config keys and
// non-string values are ASCII, so non-ASCII text is let through only where
// it can be meant: one-line strings (paths) and comments. A quote opens a
// string only where TOML allows one (a key at a line start or after '.', '['
// or '{', a value after '=', '[' or ','): toml++ reads a quote straight
// after a value as part of that value and asks about what follows it.
void check_non_ascii(const std::string& text, const std::string& source) {
  enum class In { Normal, Comment, Basic, Literal, MultiBasic, MultiLiteral } in = In::Normal;
  size_t line = 1, col = 1;
  char last = '\n';  // last non-blank character seen outside strings and comments
  auto string_may_start = [&] { return std::strchr("\n=[,{.", last) != nullptr; };
  auto at = [&](size_t i, const char* s) { return text.compare(i, std::strlen(s), s) == 0; };
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x80 && in != In::Comment && in != In::Basic && in != In::Literal)
      fail("{}:{}:{}: invalid TOML: non-ASCII character {}", source, line, col,
           in == In::Normal ? "outside a string or comment" : "in a multi-line string");
    size_t skip = 0;  // further bytes consumed together with this one
    switch (in) {
      case In::Normal:
        if (ch == '#') in = In::Comment;
        else if ((ch == '"' || ch == '\'') && !string_may_start()) last = ch;
        else if (at(i, "\"\"\"")) in = In::MultiBasic, skip = 2;
        else if (at(i, "'''")) in = In::MultiLiteral, skip = 2;
        else if (ch == '"') in = In::Basic;
        else if (ch == '\'') in = In::Literal;
        else if (ch != ' ' && ch != '\t' && ch != '\r') last = ch;
        break;
      case In::Comment:
        if (ch == '\n') in = In::Normal, last = '\n';
        break;
      case In::Basic:
        if (ch == '\\' && i + 1 < text.size() && text[i + 1] != '\n') skip = 1;
        else if (ch == '"' || ch == '\n') in = In::Normal, last = ch;
        break;
      case In::Literal:
        if (ch == '\'' || ch == '\n') in = In::Normal, last = ch;
        break;
      case In::MultiBasic:
        if (ch == '\\' && i + 1 < text.size() && text[i + 1] != '\n') skip = 1;
        else if (at(i, "\"\"\"")) in = In::Normal, skip = 2, last = '"';
        break;
      case In::MultiLiteral:
        if (at(i, "'''")) in = In::Normal, skip = 2, last = '\'';
        break;
    }
    for (size_t k = 0; k <= skip && i + k < text.size(); ++k) {
      const char c = text[i + k];
      if (c == '\n') line += 1, col = 1;
      else if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++col;
    }
    i += skip;
  }
}

}  // namespace

namespace {
// Keys of a section; a sub-table ([train.lora], `lora = {...}` or the dotted
// `lora.rank = 8`) names keys one level down ("train.lora.rank").
void apply_table(RunConfig& c, const std::string& prefix, const toml::table& table, const std::string& source) {
  for (const auto& [key, value] : table) {
    const std::string name = fmt::format("{}.{}", prefix, key.str());
    if (const auto* sub = value.as_table()) {
      apply_table(c, name, *sub, source);
      continue;
    }
    const Key& k = find_key(name, source);
    k.set(c, node_text(value, k, source));
    c.set_keys.insert(name);
  }
}
}  // namespace

void apply_toml(RunConfig& c, const std::string& toml_text, const std::string& source) {
  check_non_ascii(toml_text, source);
  toml::table doc;
  try {
    doc = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    fail("{}:{}:{}: invalid TOML: {}", source, b.line, b.column, e.description());
  }
  for (const auto& [section, node] : doc) {
    const auto* table = node.as_table();
    if (!table) fail("{}: '{}' must be a [section] table", source, std::string(section.str()));
    apply_table(c, std::string(section.str()), *table, source);
  }
}

void apply_toml_file(RunConfig& c, const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot read config file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  apply_toml(c, ss.str(), path);
}

void apply_override(RunConfig& c, const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos) fail("--set {}: expected section.key=value", assignment);
  const std::string name = assignment.substr(0, eq);
  find_key(name, "--set").set(c, assignment.substr(eq + 1));
  c.set_keys.insert(name);
}

namespace {
// The keys under their [section] headers; with `documented`, each line
// ends in a comment saying what the key does (aligned, as a reference).
std::string toml_text(const RunConfig& c, bool documented) {
  std::string out, section;
  for (const auto& k : keys()) {
    const std::string sec = k.name.substr(0, k.name.find('.'));
    if (sec != section) {
      out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", sec);
      section = sec;
    }
    const std::string line = fmt::format("{} = {}", k.name.substr(k.name.find('.') + 1), k.get(c));
    out += documented ? fmt::format("{:<40} # {}\n", line, k.doc) : line + "\n";
  }
  return out;
}
}  // namespace

std::string to_toml(const RunConfig& c) { return toml_text(c, false); }

std::string to_toml_documented(const RunConfig& c) { return toml_text(c, true); }

std::string_view option_name(DataFormat f) { return name_in(kDataFormats, f); }
std::string_view option_name(AttentionSpan a) { return name_in(kAttentionSpans, a); }
std::string_view option_name(corpus::FileType t) { return name_in(kFileTypes, t); }
std::string_view option_name(corpus::DocSeparator d) { return name_in(kDocSeparators, d); }
std::string_view option_name(corpus::OnBadDocument b) { return name_in(kOnBadDocuments, b); }
std::string_view option_name(corpus::Overflow o) { return name_in(kOverflows, o); }
std::string_view option_name(optim::ScheduleKind k) { return name_in(kSchedules, k); }
std::string_view option_name(NonfinitePolicy p) { return name_in(kNonfinitePolicies, p); }
std::string_view option_name(model::Recompute r) { return name_in(kRecomputes, r); }
std::string_view option_name(model::Precision p) { return name_in(kPrecisions, p); }
std::string_view option_name(Objective o) { return name_in(kObjectives, o); }

}  // namespace ggtrain::train
