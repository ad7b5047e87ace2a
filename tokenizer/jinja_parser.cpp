// The statement half of the template parser (see jinja_parser_impl.hpp):
// template bodies and the tags if/for/set/macro/filter/with/generation, and
// the refusal, by name and position, of tags this interpreter lacks.
#include "tokenizer/jinja_parser_impl.hpp"

namespace troupe::jinja {

// Statements up to a block tag named in `ends` (consumed up to its name,
// which is stored in `ended_by`) or, with no ends, up to the end.
Body Parser::parse_body(std::initializer_list<std::string_view> ends, std::string& ended_by) {
  DepthGuard guard(*this);
  Body body;
  while (true) {
    const Token& t = peek();
    if (t.kind == TokKind::eof) {
      if (ends.size() == 0) return body;
      fail(t, "unexpected end of template, expected '" + std::string(*(ends.end() - 1)) + "'");
    }
    if (t.kind == TokKind::text) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::text;
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (t.kind == TokKind::var_begin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::output;
      s->pos = next().pos;
      s->expr = parse_tuple(true, false);
      if (peek().kind != TokKind::var_end) fail(peek(), "expected end of print statement '}}', got " + describe(peek()));
      ++i_;
      body.push_back(std::move(s));
    } else if (t.kind == TokKind::block_begin) {
      const Token& name = peek(1);
      if (name.kind != TokKind::name) fail(name, "expected a tag name, got " + describe(name));
      for (std::string_view e : ends) {
        if (name.text == e) {
          i_ += 2;
          ended_by = name.text;
          return body;
        }
      }
      ++i_;
      body.push_back(parse_statement());
    } else {
      fail(t, "unexpected " + describe(t));
    }
  }
}

StmtPtr Parser::parse_statement() {
  const Token& t = next();  // the tag name
  const std::string& n = t.text;
  auto s = std::make_unique<Stmt>();
  s->pos = t.pos;
  if (n == "if") return parse_if(std::move(s));
  if (n == "for") return parse_for(std::move(s));
  if (n == "set") return parse_set(std::move(s));
  if (n == "macro") return parse_macro(std::move(s));
  if (n == "filter") return parse_filter_block(std::move(s));
  if (n == "with") return parse_with(std::move(s));
  if (n == "generation") {
    s->kind = StmtKind::generation;
    expect_block_end();
    std::string end;
    s->body = parse_body({"endgeneration"}, end);
    expect_block_end();
    return s;
  }
  if (n == "break" || n == "continue") {
    if (loop_depth_ == 0) fail(t, "'" + n + "' outside of a for loop");
    s->kind = n == "break" ? StmtKind::break_ : StmtKind::continue_;
    expect_block_end();
    return s;
  }
  for (std::string_view u : {"include", "import", "from", "extends", "block", "call", "autoescape", "do",
                             "trans", "pluralize", "print"}) {
    if (n == u) unsupported(t, "the '" + n + "' tag");
  }
  for (std::string_view e : {"endif", "endfor", "endset", "endmacro", "endfilter", "endwith", "elif", "else",
                             "endgeneration", "endraw"}) {
    if (n == e) fail(t, "unexpected '" + n + "' (no open block it would close)");
  }
  fail(t, "unknown tag '" + n + "'");
}

StmtPtr Parser::parse_if(StmtPtr s) {
  s->kind = StmtKind::if_;
  std::string end;
  while (true) {
    ExprPtr cond = parse_tuple(false, false);
    expect_block_end();
    Body body = parse_body({"elif", "else", "endif"}, end);
    s->branches.emplace_back(std::move(cond), std::move(body));
    if (end != "elif") break;
  }
  if (end == "else") {
    expect_block_end();
    s->else_body = parse_body({"endif"}, end);
  }
  expect_block_end();
  return s;
}

// Loop or set targets: a name, or names separated by commas (optionally
// in parentheses) for unpacking.
std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  const bool parens = skip_op("(");
  do {
    if (parens && is_op(")")) break;
    names.push_back(expect_name());
  } while (skip_op(","));
  if (parens) expect_op(")");
  return names;
}

StmtPtr Parser::parse_for(StmtPtr s) {
  s->kind = StmtKind::for_;
  s->targets = parse_targets();
  if (!skip_name("in")) fail(peek(), "expected 'in', got " + describe(peek()));
  s->expr = parse_tuple(false, false);
  if (is_name("recursive")) unsupported(peek(), "a recursive for loop");
  if (skip_name("if")) s->filter_cond = parse_expression(true);
  if (is_name("recursive")) unsupported(peek(), "a recursive for loop");
  expect_block_end();
  std::string end;
  ++loop_depth_;
  s->body = parse_body({"else", "endfor"}, end);
  --loop_depth_;
  if (end == "else") {
    expect_block_end();
    s->else_body = parse_body({"endfor"}, end);
  }
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_set(StmtPtr s) {
  s->targets.push_back(expect_name());
  if (skip_op(".")) {
    s->attr = expect_name();
  } else {
    while (skip_op(",")) s->targets.push_back(expect_name());
  }
  if (skip_op("=")) {
    s->kind = StmtKind::set;
    s->expr = parse_tuple(true, false);
    expect_block_end();
    return s;
  }
  if (s->targets.size() > 1) fail(peek(), "a block set assigns one name, expected '='");
  s->kind = StmtKind::set_block;
  while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
  expect_block_end();
  std::string end;
  s->body = parse_body({"endset"}, end);
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_macro(StmtPtr s) {
  s->kind = StmtKind::macro;
  s->targets.push_back(expect_name());
  expect_op("(");
  while (!is_op(")")) {
    if (!s->params.empty()) expect_op(",");
    if (is_op(")")) break;
    MacroParam p;
    const Token& at_param = peek();
    p.name = expect_name();
    if (skip_op("=")) {
      p.default_value = parse_expression(true);
    } else if (!s->params.empty() && s->params.back().default_value) {
      fail(at_param, "non-default argument follows default argument");
    }
    s->params.push_back(std::move(p));
  }
  expect_op(")");
  expect_block_end();
  const int saved = loop_depth_;
  const bool saved_varargs = saw_varargs_, saved_kwargs = saw_kwargs_;
  loop_depth_ = 0;  // break/continue cannot reach a loop outside the macro
  saw_varargs_ = saw_kwargs_ = false;
  std::string end;
  s->body = parse_body({"endmacro"}, end);
  s->catch_varargs = saw_varargs_;
  s->catch_kwargs = saw_kwargs_;
  loop_depth_ = saved;
  saw_varargs_ = saved_varargs;
  saw_kwargs_ = saved_kwargs;
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_filter_block(StmtPtr s) {
  s->kind = StmtKind::filter_block;
  do {
    s->filters.push_back(parse_filter(nullptr));
  } while (skip_op("|"));
  expect_block_end();
  std::string end;
  s->body = parse_body({"endfilter"}, end);
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_with(StmtPtr s) {
  s->kind = StmtKind::with;
  while (peek().kind != TokKind::block_end) {
    if (!s->assigns.empty()) expect_op(",");
    std::string name = expect_name();
    expect_op("=");
    s->assigns.emplace_back(std::move(name), parse_expression(true));
  }
  expect_block_end();
  std::string end;
  s->body = parse_body({"endwith"}, end);
  expect_block_end();
  return s;
}


Template parse(std::string_view source) { return Parser(lex(source)).run(); }

}  // namespace troupe::jinja
