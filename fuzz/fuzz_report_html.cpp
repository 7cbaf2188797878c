// libFuzzer harness: names from the input (pieces between 0xff bytes) as a run's title, folder,
// model names, messages and layer tables, through report_html. The page must hold exactly its
// three script elements, as an HTML parser splits them (tests/report/script_elements.h): one
// intact data element first, whose JSON parses back to the data the page was made from; and
// the title must end where the template ends it. A name that changes how the parser reads the
// page (a layer named "<!--<script>" once emptied it) aborts.
#include <cstdlib>
#include <string>
#include <vector>

#include "../tests/report/script_elements.h"
#include "report/report.h"

namespace {

std::vector<std::string> pieces(const uint8_t* data, size_t size) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0xff)
      out.emplace_back();
    else
      out.back() += static_cast<char>(data[i]);
  }
  return out;
}

nnfleet::Json page_data(const std::vector<std::string>& names) {
  using nnfleet::Json;
  Json models = Json::array();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& other = names[(i + 1) % names.size()];
    models.push_back({{"name", names[i]},
                      {"status", "failed"},
                      {"message", "layer '" + other + "' failed"},
                      {"stop_reason", other},
                      {"summary", "Model: \"" + names[i] + "\"\n" + other + " (Dense)\n"},
                      {"grid", {{other, names[i]}}}});
  }
  return {{"title", "nnfleet report: " + names[0]},
          {"dir", names[0]},
          {"live", false},
          {"models", models},
          {"grid_vars", Json::array({names.back()})}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nnfleet::Json;
  const Json d = page_data(pieces(data, size));
  const std::string html = nnfleet::report_html(d);
  const auto scripts = nnfleet::test_html::script_elements(html);
  if (scripts.size() != 3) std::abort();
  for (const auto& s : scripts)
    if (!s.closed || (&s != &scripts[0] && s.start_tag.find("report-data") != std::string::npos))
      std::abort();
  if (scripts[0].start_tag != "<script type=\"application/json\" id=\"report-data\">") std::abort();
  // Invalid UTF-8 in a name is written as U+FFFD; apart from that the data comes back whole,
  // once the page's packed rows (page_data) are made objects again, as the page's script does.
  const Json expected = Json::parse(d.dump(-1, ' ', false, Json::error_handler_t::replace));
  if (nnfleet::data_of_page(Json::parse(scripts[0].text)) != expected) std::abort();
  const size_t title = html.find("<title>"), title_end = html.find("</title>\n<style>\n");
  if (title == std::string::npos || title_end == std::string::npos ||
      html.find('<', title + 1) != title_end)
    std::abort();
  return 0;
}
