// Watchdog: one monitor per actor, names kept by address.
#include "actors/watchdog.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include <map>

namespace troupe {

caf::actor spawn_watchdog(caf::actor_system& system, std::vector<std::pair<std::string, caf::actor>> watched,
                          std::function<void(const std::string&, const std::string&)> on_down) {
  // The unused int: CAF 0.17's spawn of a function with no arguments binds a
  // reference to a null pointer (UBSan reports it).
  return system.spawn([watched = std::move(watched), on_down = std::move(on_down)](caf::event_based_actor* self, int) {
    auto names = std::make_shared<std::map<caf::actor_addr, std::string>>();
    for (const auto& [name, handle] : watched) {
      if (!handle) continue;
      (*names)[handle.address()] = name;
      self->monitor(handle);
    }
    self->set_down_handler([self, names, on_down](caf::down_msg& dm) {
      const auto it = names->find(dm.source);
      const std::string name = it != names->end() ? it->second : "unknown";
      const std::string why = dm.reason ? self->system().render(dm.reason) : "it exited normally";
      on_down(name, why);
    });
    // Nothing to handle: it only watches.
    return caf::behavior{[](caf::ok_atom) {}};
  }, 0);
}

}  // namespace troupe
