// The report page's scripts and styles, embedded into nnfleet when it is built
// (embed_assets.cmake): uPlot (npm `uplot`, MIT) and the page's own format.js, report.js and
// report.css.
#pragma once

namespace nnfleet::report_assets {

extern const char* const kUplotJs;
extern const char* const kUplotCss;
extern const char* const kFormatJs;
extern const char* const kReportJs;
extern const char* const kReportCss;

}  // namespace nnfleet::report_assets
