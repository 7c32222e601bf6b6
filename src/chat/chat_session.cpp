#include "chat/chat_session.h"

#include <algorithm>

#include "infer/generate.h"
#include "util/error.h"

namespace ggtrain::chat {

ChatSession::ChatSession(infer::Decoder& dec, const tokenizer::Tokenizer& tok, Template t, std::string system)
    : dec_(dec), tok_(tok), template_(t) {
  if (!system.empty()) history_.push_back({"system", std::move(system)});
  const int32_t eot = tok.token_id(template_info(t).end_of_turn);
  if (eot >= 0) stop_.push_back(eot);
  if (tok.eot_id() >= 0 && tok.eot_id() != eot) stop_.push_back(tok.eot_id());
  if (tok.eos_id() >= 0 && std::find(stop_.begin(), stop_.end(), tok.eos_id()) == stop_.end())
    stop_.push_back(tok.eos_id());
}

int64_t ChatSession::context_size() const { return dec_.n_ctx(); }

void ChatSession::clear() {
  if (!history_.empty() && history_[0].role == "system") history_.resize(1);
  else history_.clear();
}

std::vector<int32_t> ChatSession::prompt_ids(const Conversation& c) const {
  return tok_.encode(render(template_, c, true),
                     tokenizer::EncodeOptions{.add_bos = tok_.add_bos(), .parse_special = true});
}

Reply ChatSession::reply(const std::string& user, int64_t n_predict, const infer::SamplerConfig& sampler, uint64_t seed,
                         const std::function<void(const std::string&)>& on_piece,
                         const std::function<bool()>& cancelled) {
  Reply r;
  Conversation c = history_;
  c.push_back({"user", user});
  check_conversation(c, false, "chat");
  std::vector<int32_t> prompt = prompt_ids(c);
  // Oldest user+assistant pairs go while the prompt leaves no room for a reply.
  const size_t first_turn = !c.empty() && c[0].role == "system" ? 1 : 0;
  const int64_t wanted = n_predict < 0 ? dec_.n_ctx() : n_predict;  // -1: until the turn ends or the context is full
  const int64_t room = std::max<int64_t>(1, std::min<int64_t>(wanted, dec_.n_ctx() / 4));
  while (int64_t(prompt.size()) + room > dec_.n_ctx() && c.size() > first_turn + 1) {
    c.erase(c.begin() + long(first_turn), c.begin() + long(first_turn) + 2);
    ++r.dropped_turns;
    prompt = prompt_ids(c);
  }
  if (int64_t(prompt.size()) >= dec_.n_ctx())
    fail("chat: the message alone ({} tokens with the template) fills the context of {}", prompt.size(), dec_.n_ctx());
  history_.assign(c.begin(), c.end() - 1);
  const int64_t n = std::min(wanted, dec_.n_ctx() - int64_t(prompt.size()));
  const infer::Generation g =
      infer::generate(dec_, prompt, n, sampler, seed, stop_,
                      [&](int32_t id) {
                        if (on_piece && std::find(stop_.begin(), stop_.end(), id) == stop_.end())
                          on_piece(tok_.token_to_piece(id));
                      },
                      {.reuse_cache = true, .cancelled = cancelled});
  r.prompt = prompt;
  r.tokens = g.tokens;
  r.stopped = g.stopped;
  r.cancelled = g.cancelled;
  r.reused_tokens = g.reused_tokens;
  r.context_full = !g.stopped && !g.cancelled && int64_t(prompt.size() + g.tokens.size()) >= dec_.n_ctx();
  std::vector<int32_t> text_ids = g.tokens;
  if (g.stopped) text_ids.pop_back();
  std::string text;
  for (int32_t id : text_ids) text += tok_.token_to_piece(id);
  r.text = text;
  history_.push_back({"user", user});
  // An empty reply cannot enter a conversation (check_conversation): it stays out, with its question.
  if (trim(text).empty()) history_.pop_back();
  else history_.push_back({"assistant", text});
  return r;
}

Template template_for_model(const tokenizer::Tokenizer& tok, const std::string& name, std::string* warning) {
  if (!name.empty()) return template_named(name, "--chat-template");
  if (const auto t = detect_template(tok.chat_template())) return *t;
  *warning = tok.chat_template().empty()
                 ? "the model has no tokenizer.chat_template; using chatml (--chat-template NAME to choose)"
                 : fmt::format("the model's tokenizer.chat_template (\"{}...\") is none that ggtrain renders; using "
                               "chatml (--chat-template NAME to choose)",
                               tok.chat_template().substr(0, 40));
  return Template::kChatml;
}

}  // namespace ggtrain::chat
