// The command line and the --config file beneath it (kvgate/app/config.h: load_config).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <istream>
#include <memory>

#include "app/flag_hint.h"
#include "kvgate/app/config.h"
#include "kvgate/app/gateway.h"
#include "yaml-cpp/yaml.h"

namespace kvgate::app {
namespace {

// A YAML mapping of flag names (without their dashes; '_' may stand for '-') to values: a scalar,
// a sequence (a flag's several values: worker-urls), or a sequence of sequences (a flag given
// several times, each with its own values: prefill). CLI11 applies each value only to a flag the
// command line did not give, so the command line wins.
class YamlFlagFile : public CLI::Config {
 public:
  explicit YamlFlagFile(const CLI::App* app) : app_(app) {}

  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return ""; }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    YAML::Node root;
    try {
      root = YAML::Load(in);
    } catch (const YAML::Exception& e) {
      fail(std::string("not YAML: ") + e.what());  // "yaml-cpp: error at line L, column C: ..."
    }
    if (root.IsNull()) return {};
    if (!root.IsMap()) fail("not a mapping of flag names to values");
    std::vector<CLI::ConfigItem> items;
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>("");
      CLI::ConfigItem item;
      item.name = flag_name(key);
      item.inputs = values(key, entry.second);
      items.push_back(std::move(item));
    }
    return items;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw CLI::ConfigError(file() + ": " + what);
  }
  std::string file() const {
    const CLI::Option* o = app_->get_config_ptr();
    return o != nullptr && !o->results().empty() ? o->results().back() : "--config";
  }

  // The flag `key` names; fails naming the key when kvgate has no such flag.
  std::string flag_name(const std::string& key) const {
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    if (name.rfind("--", 0) == 0) name.erase(0, 2);
    if (name == "config") fail("a configuration file cannot name another (config)");
    if (name == "help" || name == "version") fail("'" + key + "' is not a setting");
    if (name.empty() || app_->get_option_no_throw("--" + name) == nullptr) {
      fail("'" + key + "' is not a kvgate flag" + flag_advice("--" + name, *app_) +
           " (kvgate --help lists them)");
    }
    return name;
  }

  std::vector<std::string> values(const std::string& key, const YAML::Node& v) const {
    if (v.IsScalar()) return {v.Scalar()};
    if (v.IsNull()) fail("'" + key + "' has no value");
    if (v.IsMap()) fail("'" + key + "' is a mapping; a flag takes a value or a list");
    std::vector<std::string> out;
    for (const YAML::Node& e : v) {
      if (e.IsScalar()) {
        out.push_back(e.Scalar());
        continue;
      }
      if (!e.IsSequence()) fail("'" + key + "': a list of values, or of lists of values");
      // CLI11's separator between the groups of a flag given more than once.
      if (!out.empty()) out.emplace_back("%%");
      for (const YAML::Node& inner : e) {
        if (!inner.IsScalar()) fail("'" + key + "': lists nest one level at most");
        out.push_back(inner.Scalar());
      }
    }
    return out;
  }

  const CLI::App* app_;
};

// What CLI11 says of a bad command line, in kvgate's words.
std::string parse_error(const CLI::ParseError& e, const CLI::App& cli) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    // "The following arguments were not expected: --a --b": name the flag first.
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    return unexpected_arguments_message(colon == std::string::npos ? what : what.substr(colon + 2),
                                        cli);
  }
  if (dynamic_cast<const CLI::ConfigError*>(&e) != nullptr) return e.what();  // names the file
  if (dynamic_cast<const CLI::FileError*>(&e) != nullptr)
    return std::string("--config ") + e.what();
  return std::string(e.what()) + " (kvgate --help explains every flag)";
}

}  // namespace

Result<LoadedConfig> load_config(const std::vector<std::string>& args) {
  LoadedConfig out;
  CLI::App cli;
  add_flags(cli, out.config);
  cli.set_version_flag("--version", std::string("kvgate ") + kVersion);
  cli.set_config("--config", "",
                 "Flags from a YAML file, keyed by flag name without dashes (worker-urls: [URL]); "
                 "the command line wins. SIGHUP or POST /admin/reload re-read it")
      ->group("Configuration file");
  cli.config_formatter(std::make_shared<YamlFlagFile>(&cli));
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // as CLI11 takes them
    cli.parse(reversed);
  } catch (const CLI::Success& e) {  // --help, --version
    out.exit_code = cli.exit(e);
    return out;
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(parse_error(e, cli));
  }
  if (const CLI::Option* file = cli.get_config_ptr(); file != nullptr && file->count() > 0) {
    out.config.config_file = file->results().back();
  }
  if (Status s = finish_config(out.config); !s.ok()) return s;
  if (cli.count("--balance-rel-threshold") > 0) {
    out.config.launch_warnings.push_back(
        "--balance-rel-threshold: kvgate spills when the deepest holder's load passes the fleet "
        "mean times this factor; SGLang's router compares the most loaded worker with the least "
        "loaded, so the same number spills later here");
  }
  for (const CLI::Option* o : cli.get_options()) {
    if (o->count() > 0 && o != cli.get_config_ptr() && o->get_single_name() != "help") {
      out.values[o->get_single_name()] = o->results();
    }
  }
  return out;
}

}  // namespace kvgate::app
