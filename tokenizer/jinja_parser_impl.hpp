// The parser's state and its methods, shared by jinja_parser.cpp (statements)
// and jinja_parse_expr.cpp (expressions). Internal to the interpreter.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja_lexer.hpp"
#include "tokenizer/jinja_parser.hpp"

namespace troupe::jinja {

constexpr int kMaxParseDepth = 200;  // templates are untrusted input: bound the recursion
constexpr int kMaxExprHeight = 400;  // and the height of expression trees

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Template run() {
    Template t;
    std::string end;
    t.body = parse_body({}, end);
    return t;
  }

 private:
  // ---- token helpers
  const Token& peek(size_t k = 0) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(i_++, toks_.size() - 1)]; }
  bool is_op(std::string_view s, size_t k = 0) const { return peek(k).kind == TokKind::op && peek(k).text == s; }
  bool is_name(std::string_view s, size_t k = 0) const {
    return peek(k).kind == TokKind::name && peek(k).text == s;
  }
  bool skip_op(std::string_view s) { return is_op(s) ? (++i_, true) : false; }
  bool skip_name(std::string_view s) { return is_name(s) ? (++i_, true) : false; }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokKind::eof: return "end of template";
      case TokKind::block_end: return "'%}'";
      case TokKind::var_end: return "'}}'";
      case TokKind::block_begin: return "'{%'";
      case TokKind::var_begin: return "'{{'";
      case TokKind::text: return "template text";
      case TokKind::string: return "string";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void fail(const Token& t, const std::string& what) const {
    throw Error(Errc::bad_format, at(t.pos, what));
  }
  [[noreturn]] void unsupported(const Token& t, const std::string& what) const {
    throw Error(Errc::unsupported, at(t.pos, what + " is not supported"));
  }
  void expect_op(std::string_view s) {
    if (!skip_op(s)) fail(peek(), "expected '" + std::string(s) + "', got " + describe(peek()));
  }
  void expect_block_end() {
    if (peek().kind != TokKind::block_end) fail(peek(), "expected end of statement '%}', got " + describe(peek()));
    ++i_;
  }
  std::string expect_name() {
    if (peek().kind != TokKind::name) fail(peek(), "expected a name, got " + describe(peek()));
    return next().text;
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) p_.fail(p_.peek(), "template nested too deeply");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  // Records a finished node's height and rejects absurdly deep trees
  // (`1+1+1+...` builds a left-deep chain without recursing here).
  ExprPtr seal(ExprPtr e) {
    for (const auto& a : e->args) {
      if (a) e->height = std::max(e->height, a->height + 1);
    }
    for (const auto& kv : e->kwargs) e->height = std::max(e->height, kv.second->height + 1);
    if (e->height > kMaxExprHeight) throw Error(Errc::bad_format, at(e->pos, "expression nested too deeply"));
    return e;
  }

  ExprPtr node(ExprKind kind, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // ---- statements (jinja_parser.cpp)
  Body parse_body(std::initializer_list<std::string_view> ends, std::string& ended_by);
  StmtPtr parse_statement();
  StmtPtr parse_if(StmtPtr s);
  std::vector<std::string> parse_targets();
  StmtPtr parse_for(StmtPtr s);
  StmtPtr parse_set(StmtPtr s);
  StmtPtr parse_macro(StmtPtr s);
  StmtPtr parse_filter_block(StmtPtr s);
  StmtPtr parse_with(StmtPtr s);

  // ---- expressions (jinja_parse_expr.cpp)
  bool is_tuple_end() const;
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr binary(Op op, Pos pos, ExprPtr left, ExprPtr right);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr literal(Pos pos, Value v);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr target);
  void parse_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  ExprPtr parse_filter(ExprPtr input);
  ExprPtr parse_test(ExprPtr input);
  ExprPtr parse_filter_expr(ExprPtr e);

  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  bool saw_varargs_ = false;  // a name `varargs` / `kwargs` was read in the macro being parsed
  bool saw_kwargs_ = false;
};

}  // namespace troupe::jinja
