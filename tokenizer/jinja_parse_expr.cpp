// The expression half of the template parser (see jinja_parser_impl.hpp).
// The precedence ladder mirrors Jinja's own parser, lowest first: conditional
// expression, or, and, not, comparisons, + -, ~, * / // %, **, unary - +,
// then postfix (.attr, [index], call) and filters/tests, which bind tightest:
// `'a' + x | trim` trims x alone.
#include "tokenizer/jinja_parser_impl.hpp"

namespace troupe::jinja {

bool Parser::is_tuple_end() const {
  const Token& t = peek();
  return t.kind == TokKind::var_end || t.kind == TokKind::block_end || (t.kind == TokKind::op && t.text == ")");
}

// Comma-separated expressions: one gives itself, several (or a trailing
// comma) a tuple. with_condexpr off leaves `if` to the caller (for ... if).
ExprPtr Parser::parse_tuple(bool with_condexpr, bool explicit_parens) {
  const Pos pos = peek().pos;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end()) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail(peek(), "expected an expression, got " + describe(peek()));
  }
  auto e = node(ExprKind::tuple, pos);
  e->args = std::move(items);
  return seal(std::move(e));
}

ExprPtr Parser::parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

ExprPtr Parser::parse_condexpr() {
  DepthGuard guard(*this);
  ExprPtr value = parse_or();
  while (is_name("if")) {
    auto e = node(ExprKind::conditional, next().pos);
    e->args.push_back(std::move(value));
    e->args.push_back(parse_or());
    e->args.push_back(skip_name("else") ? parse_condexpr() : nullptr);
    value = seal(std::move(e));
  }
  return value;
}

ExprPtr Parser::binary(Op op, Pos pos, ExprPtr left, ExprPtr right) {
  auto e = node(ExprKind::binary, pos);
  e->op = op;
  e->args.push_back(std::move(left));
  e->args.push_back(std::move(right));
  return seal(std::move(e));
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const Pos pos = next().pos;
    left = binary(Op::or_, pos, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const Pos pos = next().pos;
    left = binary(Op::and_, pos, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    auto e = node(ExprKind::unary, next().pos);
    e->op = Op::not_;
    e->args.push_back(parse_not());
    return seal(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Pos pos = peek().pos;
  ExprPtr first = parse_math1();
  auto e = node(ExprKind::compare, pos);
  e->args.push_back(std::move(first));
  while (true) {
    static const std::pair<std::string_view, Op> kOps[] = {{"==", Op::eq}, {"!=", Op::ne}, {"<", Op::lt},
                                                          {"<=", Op::le}, {">", Op::gt}, {">=", Op::ge}};
    bool matched = false;
    for (const auto& [text, op] : kOps) {
      if (is_op(text)) {
        ++i_;
        e->ops.push_back(op);
        matched = true;
        break;
      }
    }
    if (!matched && is_name("in")) {
      ++i_;
      e->ops.push_back(Op::in);
      matched = true;
    } else if (!matched && is_name("not") && is_name("in", 1)) {
      i_ += 2;
      e->ops.push_back(Op::not_in);
      matched = true;
    }
    if (!matched) break;
    e->args.push_back(parse_math1());
  }
  if (e->ops.empty()) return std::move(e->args[0]);
  return seal(std::move(e));
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& t = next();
    left = binary(t.text == "+" ? Op::add : Op::sub, t.pos, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (is_op("~")) {
    const Pos pos = next().pos;
    left = binary(Op::concat, pos, std::move(left), parse_math2());
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& t = next();
    const Op op = t.text == "*" ? Op::mul : t.text == "/" ? Op::div : t.text == "//" ? Op::floordiv : Op::mod;
    left = binary(op, t.pos, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {  // left-associative, as in Jinja (unlike Python)
    const Pos pos = next().pos;
    left = binary(Op::pow, pos, std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const Token& t = next();
    e = node(ExprKind::unary, t.pos);
    e->op = t.text == "-" ? Op::neg : Op::pos;
    e->args.push_back(parse_unary(false));
    e = seal(std::move(e));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::literal(Pos pos, Value v) {
  auto e = node(ExprKind::literal, pos);
  e->value = std::move(v);
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  switch (t.kind) {
    case TokKind::name: {
      ++i_;
      if (t.text == "true" || t.text == "True") return literal(t.pos, Value(true));
      if (t.text == "false" || t.text == "False") return literal(t.pos, Value(false));
      if (t.text == "none" || t.text == "None") return literal(t.pos, Value::none());
      saw_varargs_ = saw_varargs_ || t.text == "varargs";
      saw_kwargs_ = saw_kwargs_ || t.text == "kwargs";
      auto e = node(ExprKind::name, t.pos);
      e->name = t.text;
      return e;
    }
    case TokKind::string: {
      std::string s;
      const Pos pos = t.pos;
      while (peek().kind == TokKind::string) s += next().text;  // adjacent literals join
      return literal(pos, Value(std::move(s)));
    }
    case TokKind::integer:
    case TokKind::floating: ++i_; return literal(t.pos, t.value);
    default: break;
  }
  if (skip_op("(")) {
    ExprPtr e = parse_tuple(true, true);
    expect_op(")");
    return e;
  }
  if (is_op("[")) {
    auto e = node(ExprKind::list, next().pos);
    while (!is_op("]")) {
      if (!e->args.empty()) expect_op(",");
      if (is_op("]")) break;
      e->args.push_back(parse_expression(true));
    }
    expect_op("]");
    return seal(std::move(e));
  }
  if (is_op("{")) {
    auto e = node(ExprKind::dict, next().pos);
    while (!is_op("}")) {
      if (!e->args.empty()) expect_op(",");
      if (is_op("}")) break;
      e->args.push_back(parse_expression(true));
      expect_op(":");
      e->args.push_back(parse_expression(true));
    }
    expect_op("}");
    return seal(std::move(e));
  }
  fail(t, "unexpected " + describe(t));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    if (is_op(".")) {
      const Pos pos = next().pos;
      const Token& t = next();
      if (t.kind == TokKind::name) {
        auto a = node(ExprKind::attr, pos);
        a->name = t.text;
        a->args.push_back(std::move(e));
        e = seal(std::move(a));
      } else if (t.kind == TokKind::integer) {  // x.0 is x[0]
        auto a = node(ExprKind::item, pos);
        a->args.push_back(std::move(e));
        a->args.push_back(literal(t.pos, t.value));
        e = seal(std::move(a));
      } else {
        fail(t, "expected an attribute name after '.', got " + describe(t));
      }
    } else if (is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr target) {
  const Pos pos = next().pos;  // '['
  ExprPtr start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (!is_op(":")) {
      expect_op("]");
      auto e = node(ExprKind::item, pos);
      e->args.push_back(std::move(target));
      e->args.push_back(std::move(start));
      return seal(std::move(e));
    }
  }
  auto e = node(ExprKind::slice, pos);
  e->args.push_back(std::move(target));
  e->args.push_back(std::move(start));
  expect_op(":");
  e->args.push_back(is_op("]") || is_op(":") ? nullptr : parse_expression(true));
  ExprPtr step;
  if (skip_op(":") && !is_op("]")) step = parse_expression(true);
  e->args.push_back(std::move(step));
  expect_op("]");
  return seal(std::move(e));
}

// Arguments after '(' into e->args (from index 1) and e->kwargs.
void Parser::parse_args(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) unsupported(peek(), "*args and **kwargs in calls");
    if (peek().kind == TokKind::name && is_op("=", 1)) {
      std::string key = next().text;
      ++i_;
      e.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!e.kwargs.empty()) fail(peek(), "positional argument after keyword argument");
      e.args.push_back(parse_expression(true));
    }
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = node(ExprKind::call, peek().pos);
  e->args.push_back(std::move(callee));
  parse_args(*e);
  return seal(std::move(e));
}

std::string Parser::dotted_name() {
  std::string name = expect_name();
  while (is_op(".") && peek(1).kind == TokKind::name) {
    i_ += 1;
    name += "." + next().text;
  }
  return name;
}

// A filter after '|' (or first in a filter block); input may be null.
ExprPtr Parser::parse_filter(ExprPtr input) {
  const Token& at_name = peek();
  auto e = node(ExprKind::filter, at_name.pos);
  e->name = dotted_name();
  if (!has_filter(e->name)) unsupported(at_name, "the filter '" + e->name + "'");
  e->args.push_back(std::move(input));
  if (is_op("(")) parse_args(*e);
  return seal(std::move(e));
}

ExprPtr Parser::parse_test(ExprPtr input) {
  const Pos pos = next().pos;  // 'is'
  auto e = node(ExprKind::test, pos);
  e->negated = skip_name("not");
  const Token& at_name = peek();
  e->name = dotted_name();
  if (!has_test(e->name)) unsupported(at_name, "the test '" + e->name + "'");
  e->args.push_back(std::move(input));
  const Token& t = peek();
  if (is_op("(")) {
    parse_args(*e);
  } else if ((t.kind == TokKind::name || t.kind == TokKind::string || t.kind == TokKind::integer ||
              t.kind == TokKind::floating || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    // Jinja's one-argument form: `x is divisibleby 3`, `x is sameas false`.
    if (is_name("is")) fail(t, "tests cannot be chained with 'is'");
    e->args.push_back(parse_postfix(parse_primary()));
  }
  return seal(std::move(e));
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (skip_op("|")) {
      e = parse_filter(std::move(e));
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

}  // namespace troupe::jinja
