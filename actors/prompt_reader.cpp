// Chat messages travel as plain data with their JSON fields as text
// (actors/request_types.hpp); here they become the template's input.
#include "actors/prompt_reader.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "actors/request_rules.hpp"
#include "core/error.hpp"
#include "tokenizer/rerank_prompt.hpp"

namespace troupe {
namespace {

// A JSON text from a request, parsed; the field is named when it is not JSON.
nlohmann::ordered_json parse_json_field(const std::string& text, const std::string& param) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw RequestError(Errc::invalid_argument, param, param + " is not valid JSON: " + e.what());
  }
}

// OpenAI's clients send a call's arguments back as the JSON text the API
// returned; templates that write them with `| tojson` (Llama 3.1, Mistral)
// would quote that text again. As vLLM and llama.cpp do, arguments that
// are the text of a JSON object become the object; Qwen's templates, which
// take either, render the same.
void arguments_as_objects(nlohmann::ordered_json& tool_calls) {
  if (!tool_calls.is_array()) return;
  for (auto& call : tool_calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
    auto& fn = call["function"];
    if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
    nlohmann::ordered_json args =
        nlohmann::ordered_json::parse(fn["arguments"].get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (args.is_object()) fn["arguments"] = std::move(args);
  }
}

ChatRenderInput render_input(const ChatPrompt& chat) {
  if (chat.messages.empty()) {
    throw RequestError(Errc::invalid_argument, "messages", "'messages' must hold at least one message");
  }
  ChatRenderInput in;
  in.add_generation_prompt = chat.add_generation_prompt;
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    const ChatTurn& t = chat.messages[i];
    ChatMessage m;
    m.role = t.role;
    if (t.has_content) m.content = t.content;
    if (!t.fields_json.empty()) {
      const std::string param = "messages[" + std::to_string(i) + "]";
      nlohmann::ordered_json fields = parse_json_field(t.fields_json, param);
      if (!fields.is_object()) throw RequestError(Errc::invalid_argument, param, param + " must be an object");
      for (auto& [key, value] : fields.items()) {
        if (key == "tool_calls") {
          m.tool_calls = value;
          arguments_as_objects(m.tool_calls);
        } else if (key != "role" && !value.is_null()) {
          m.extra[key] = value;
        }
      }
    }
    in.messages.push_back(std::move(m));
  }
  if (!chat.tools_json.empty()) in.tools = parse_json_field(chat.tools_json, "tools");
  if (!chat.template_kwargs_json.empty()) {
    in.extra = parse_json_field(chat.template_kwargs_json, "chat_template_kwargs");
    if (!in.extra.is_object()) {
      throw RequestError(Errc::invalid_argument, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"}) {
      if (in.extra.contains(reserved)) {
        throw RequestError(
            Errc::invalid_argument, "chat_template_kwargs",
            std::string("'chat_template_kwargs' may not set '") + reserved + "'; it is a field of its own");
      }
    }
  }
  return in;
}

// The conversation rendered as Hugging Face would render it. A template
// that cannot take a turn without content (SmolLM2's adds the content to a
// string) fails on the assistant turn that only called tools, which every
// tool-calling client sends back: then, as llama.cpp does for such
// templates, those turns are rendered again with empty content.
std::string render_whole(const ChatPrompter& prompter, const ChatPrompt& chat) {
  ChatRenderInput in = render_input(chat);
  const bool contentless =
      std::any_of(in.messages.begin(), in.messages.end(), [](const ChatMessage& m) { return !m.content; });
  if (!contentless) return prompter.render(std::move(in));
  ChatRenderInput retry = in;
  try {
    return prompter.render(std::move(in));
  } catch (const Error&) {
    for (ChatMessage& m : retry.messages) {
      if (!m.content && !m.extra.contains("content")) m.content = "";
    }
    return prompter.render(std::move(retry));
  }
}

// A prefill: the conversation rendered without a generation prompt, cut
// where the last message's content ends (as vLLM does). A template that
// does not write that content as it is cannot be continued.
std::string render_chat(const ChatPrompter& prompter, const ChatPrompt& chat) {
  if (!chat.continue_final_message || chat.messages.empty()) return render_whole(prompter, chat);
  const ChatTurn& last = chat.messages.back();
  const std::string param = "messages[" + std::to_string(chat.messages.size() - 1) + "]";
  if (last.role != "assistant") {
    throw RequestError(Errc::invalid_argument, param,
                       "continuing the final message needs it to be the assistant's, got '" + last.role + "'");
  }
  ChatPrompt whole = chat;
  whole.add_generation_prompt = false;
  const std::string text = render_whole(prompter, whole);
  if (last.content.empty()) {
    throw RequestError(Errc::invalid_argument, param + ".content",
                       "continuing the final message needs its content: the text to go on from");
  }
  const size_t at = text.rfind(last.content);
  if (at == std::string::npos) {
    throw RequestError(Errc::invalid_argument, param + ".content",
                       "the chat template does not write the final message's content as it is, so the prompt "
                       "cannot end inside it");
  }
  return text.substr(0, at + last.content.size());
}

// Gemma 3's processor: each image's begin token, as the template wrote it,
// becomes "\n\n" begin, the image token, end "\n\n", tokenized with the
// text around it (expand_images then repeats the image token to the rows).
std::string frame_images(const std::string& text, const Tokenizer& tok, const ModelInfo& m) {
  const std::string begin = tok.token_to_bytes(m.image_begin, /*render_special=*/true);
  if (begin.empty()) return text;
  const std::string framed =
      "\n\n" + begin + tok.token_to_bytes(m.image_token, true) + tok.token_to_bytes(m.image_end, true) + "\n\n";
  std::string out;
  size_t from = 0;
  for (size_t at = text.find(begin); at != std::string::npos; at = text.find(begin, from)) {
    out.append(text, from, at - from).append(framed);
    from = at + begin.size();
  }
  return out.append(text, from, std::string::npos);
}

std::string prompt_field(const EngineRequest& r) {
  if (!r.prompt_field.empty()) return r.prompt_field;
  return r.kind == EngineRequest::Kind::chat ? "messages" : "prompt";
}

}  // namespace

PromptReader::PromptReader(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<const ChatPrompter> prompter,
                           ModelInfo model)
    : tokenizer_(std::move(tokenizer)), prompter_(std::move(prompter)), model_(std::move(model)) {}

std::vector<int32_t> PromptReader::expand_images(const std::vector<int32_t>& ids, const EngineRequest& r,
                                                 std::vector<ImageSpan>* images) const {
  const std::vector<ChatImage>& given = r.chat.images;
  if (!given.empty() && model_.image_tokens == 0) {
    throw RequestError(Errc::invalid_argument, given.front().param,
                       model_.name + " reads text only: it cannot take images");
  }
  if (!given.empty() && images == nullptr) {
    throw RequestError(Errc::invalid_argument, given.front().param, "images are not taken here");
  }
  if (model_.image_tokens == 0) return ids;
  const auto placed = static_cast<size_t>(std::count(ids.begin(), ids.end(), model_.image_token));
  if (placed != given.size()) {
    const std::string token = tokenizer_->token_to_bytes(model_.image_token, /*render_special=*/true);
    if (given.empty()) {
      throw RequestError(Errc::invalid_argument, prompt_field(r),
                         "the prompt holds the image token '" + token + "' " + std::to_string(placed) +
                             " time(s) but no image comes with it");
    }
    throw RequestError(Errc::invalid_argument, "messages",
                       "the chat template wrote the image token '" + token + "' " + std::to_string(placed) +
                           " time(s) for " + std::to_string(given.size()) +
                           " image(s): it must write one for each image part");
  }
  if (given.empty()) return ids;
  std::vector<int32_t> out;
  out.reserve(ids.size() + given.size() * static_cast<size_t>(model_.image_tokens));
  images->clear();
  for (const int32_t t : ids) {
    if (t != model_.image_token) {
      out.push_back(t);
      continue;
    }
    images->push_back({.position = static_cast<int32_t>(out.size()), .n_tokens = model_.image_tokens});
    out.insert(out.end(), static_cast<size_t>(model_.image_tokens), t);
  }
  return out;
}

std::vector<int32_t> PromptReader::prompt_ids(EngineRequest& r, std::vector<ImageSpan>* images) const {
  const std::string field = prompt_field(r);
  std::vector<int32_t> ids;
  switch (r.kind) {
    case EngineRequest::Kind::text:
      try {
        ids = tokenizer_->encode(r.text.text, r.text.add_special, r.text.parse_special);
      } catch (const Error& e) {
        throw RequestError(e.code(), field, std::string("cannot tokenize the prompt: ") + e.what());
      }
      break;
    case EngineRequest::Kind::chat: {
      std::string text;
      try {
        text = render_chat(*prompter_, r.chat);
      } catch (const RequestError&) {
        throw;
      } catch (const Error& e) {
        // raise_exception() in a template refuses the conversation (roles
        // out of order, say): the client's messages are at fault. Anything
        // else is the template's own failure.
        if (e.code() == Errc::invalid_argument) throw RequestError(Errc::invalid_argument, "messages", e.what());
        throw Error(Errc::internal, std::string("the chat template failed: ") + e.what());
      }
      if (!r.chat.images.empty() && model_.image_begin >= 0 && model_.image_tokens > 0) {
        text = frame_images(text, *tokenizer_, model_);
      }
      ids = encode_chat(*tokenizer_, text);
      break;
    }
    case EngineRequest::Kind::pair:
      return pair_ids(r, field);
    case EngineRequest::Kind::tokens:
      // Ids are taken as given: an empty list is refused, not completed.
      ids = std::move(r.tokens);
      r.tokens.clear();
      if (ids.empty()) throw RequestError(Errc::invalid_argument, field, "'" + field + "' must not be empty");
      check_prompt_tokens(ids, model_.n_vocab, field);
      return expand_images(ids, r, images);
  }
  ensure_prompt(ids, model_.bos, field);
  return expand_images(ids, r, images);
}

std::vector<int32_t> PromptReader::admit(EngineRequest& r, std::vector<ImageSpan>* images) const {
  check_embed_params(r.params.embed, model_);
  check_generate_params(r.params);
  check_logit_bias(r.params.sampling.logit_bias, model_.n_vocab);
  check_output_format(r.params.format);
  if (r.params.embed.on && !r.chat.images.empty()) {
    throw RequestError(Errc::invalid_argument, r.chat.images.front().param, "an embedding request cannot take images");
  }
  std::vector<int32_t> ids = prompt_ids(r, images);
  if (r.params.embed.on) {
    fit_embed_input(ids, r.params.embed.truncate, model_, prompt_field(r));
    r.params.max_new_tokens = 1;  // the scheduler's accounting; nothing is generated
    return ids;
  }
  r.params.max_new_tokens = fit_to_context(static_cast<int32_t>(ids.size()), r.params.max_new_tokens,
                                           r.fit_max_tokens, model_.context_length, prompt_field(r));
  return ids;
}

std::vector<int32_t> PromptReader::pair_ids(EngineRequest& r, const std::string& field) const {
  if (model_.n_labels == 0) {
    throw RequestError(Errc::invalid_argument, field,
                       model_.name + " is not a cross-encoder: it takes one text per input, not a pair");
  }
  // Cut as the tokenizer's longest_first truncation cuts a pair (the longer
  // text first), to truncate_prompt_tokens or the context; fit_embed_input
  // then checks what is left.
  const int32_t truncate = r.params.embed.truncate;
  check_embed_truncate(truncate, model_);
  const int32_t budget = truncate == -1 ? model_.context_length : truncate;
  if (!model_.rerank_template.empty()) {
    // A causal reranker: the pair written into its prompt, one segment.
    try {
      return encode_rerank_prompt(*tokenizer_, model_.rerank_template, r.text.text, r.pair_text, budget);
    } catch (const Error& e) {
      const bool budget_fault = e.code() == Errc::invalid_argument && truncate > 0;
      throw RequestError(e.code(), budget_fault ? "truncate_prompt_tokens" : field,
                         std::string("cannot tokenize the pair: ") + e.what());
    }
  }
  Tokenizer::Pair pair;
  try {
    pair = tokenizer_->encode_pair(r.text.text, r.pair_text, budget);
  } catch (const Error& e) {
    const bool budget_fault =
        e.code() == Errc::invalid_argument && budget > 0 && budget <= tokenizer_->pair_special_count();
    throw RequestError(e.code(), budget_fault ? "truncate_prompt_tokens" : field,
                       std::string("cannot tokenize the pair: ") + e.what());
  }
  r.params.embed.type1_from = model_.two_segments ? pair.type1_from : -1;
  return std::move(pair.ids);
}

TokenizeAnswer PromptReader::tokenize(EngineRequest request, bool detokenize) const {
  TokenizeAnswer a;
  a.max_model_len = model_.context_length;
  try {
    if (detokenize) {
      check_prompt_tokens(request.tokens, model_.n_vocab, "tokens");
      a.text = text_of(request.tokens);
      return a;
    }
    std::vector<ImageSpan> images;
    a.tokens = prompt_ids(request, &images);
    for (const int32_t t : a.tokens) a.pieces.push_back(tokenizer_->token_to_bytes(t, /*render_special=*/true));
  } catch (const RequestError& e) {
    a.error_code = e.code();
    a.error = e.what();
    a.error_param = e.param();
  } catch (const Error& e) {
    a.error_code = e.code();
    a.error = e.what();
  } catch (const std::exception& e) {
    a.error = e.what();
  }
  return a;
}

std::string PromptReader::text_of(const std::vector<int32_t>& ids) const {
  return tokenizer_->decode(ids, /*skip_special=*/false);
}

}  // namespace troupe
