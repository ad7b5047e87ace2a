// Tool schemas travel on as JSON text (the chat template reads them; a
// forcing choice compiles their parameters in the engine); only what the
// edge needs to decide is read here.
#include "net/request_tools.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>

#include "net/api_error.hpp"
#include "net/request_field.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

[[noreturn]] void invalid(const std::string& param, const std::string& what) {
  throw invalid_field(param, what, "invalid_value");
}

std::string text(const json::string& s) { return std::string(s.data(), s.size()); }

// Each tool: {"type": "function", "function": {"name", "description"?, "parameters"?}}.
std::vector<std::string> tool_names(const json::array& tools) {
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!tools[i].is_object()) invalid(p, "'" + p + "' must be an object");
    const json::object& t = tools[i].as_object();
    if (const json::value* type = field(t, "type");
        type != nullptr && !(type->is_string() && type->as_string() == "function")) {
      invalid(p + ".type", "'" + p + ".type' must be 'function'");
    }
    const json::value* fn = field(t, "function");
    if (fn == nullptr || !fn->is_object()) invalid(p + ".function", "'" + p + ".function' must be an object");
    const json::value* name = field(fn->as_object(), "name");
    if (name == nullptr || !name->is_string() || name->as_string().empty()) {
      invalid(p + ".function.name", "'" + p + ".function.name' must be a non-empty string");
    }
    if (const json::value* params = field(fn->as_object(), "parameters"); params != nullptr && !params->is_object()) {
      invalid(p + ".function.parameters", "'" + p + ".function.parameters' must be an object (a JSON schema)");
    }
    std::string n = text(name->as_string());
    if (std::find(names.begin(), names.end(), n) != names.end()) {
      invalid(p + ".function.name", "two tools are named '" + n + "'");
    }
    names.push_back(std::move(n));
  }
  return names;
}

}  // namespace

void read_tools(const json::object& o, ParsedRequest& r) {
  ToolChoice& c = r.tool_choice;
  if (const json::value* tools = field(o, "tools")) {
    if (!tools->is_array()) invalid("tools", "'tools' must be an array");
    if (!tools->as_array().empty()) {
      c.names = tool_names(tools->as_array());
      r.chat.tools_json = json::serialize(*tools);
    }
  }
  c.mode = c.names.empty() ? ToolChoice::Mode::none : ToolChoice::Mode::automatic;
  if (const json::value* p = field(o, "parallel_tool_calls")) {
    if (!p->is_bool()) invalid("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    c.parallel = p->as_bool();
  }
  const json::value* v = field(o, "tool_choice");
  if (v == nullptr) return;
  if (v->is_string()) {
    const json::string& s = v->as_string();
    if (s == "none") {
      c.mode = ToolChoice::Mode::none;
    } else if (s == "auto") {
      c.mode = c.names.empty() ? ToolChoice::Mode::none : ToolChoice::Mode::automatic;
    } else if (s == "required") {
      c.mode = ToolChoice::Mode::required;
    } else {
      invalid("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or a function, got '" + text(s) + "'");
    }
  } else if (v->is_object()) {
    // {"type": "function", "function": {"name": "..."}}
    const json::value* fn = field(v->as_object(), "function");
    const json::value* name = fn != nullptr && fn->is_object() ? field(fn->as_object(), "name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      invalid("tool_choice.function.name",
              "'tool_choice' names a function as {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    c.mode = ToolChoice::Mode::function;
    c.function = text(name->as_string());
    if (std::find(c.names.begin(), c.names.end(), c.function) == c.names.end()) {
      invalid("tool_choice.function.name",
              "'tool_choice' names the function '" + c.function + "', which is not in 'tools'");
    }
  } else {
    invalid("tool_choice", "'tool_choice' must be a string or an object");
  }
  if (c.forces() && c.names.empty()) invalid("tool_choice", "'tool_choice' 'required' needs 'tools'");
  if (c.forces() && r.params.format.constrained()) {
    invalid("tool_choice",
            "'tool_choice' forces tool calls; it cannot be combined with another output constraint (" +
                (r.params.format.param.empty() ? std::string("response_format") : r.params.format.param) + ")");
  }
}

}  // namespace troupe::net
