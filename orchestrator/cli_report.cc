// `tessel report RUN_DIR`: the run's report page (orchestrator/report.h).
#include <iostream>
#include <memory>
#include <string>

#include "orchestrator/cli.h"
#include "orchestrator/report.h"

namespace tessel::cli {

void RegisterReportCommand(CLI::App& app, Status* result) {
  auto run_dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* report = app.add_subcommand(
      "report", "Write RUN_DIR/report.html from the run's metrics.csv and summary.json (self-contained: inline SVG)");
  report->add_option("RUN_DIR", *run_dir, "A run directory (job.output_dir, or runs/NAME-TIME)")->required();
  report->add_option("--out", *out, "Write the page here instead of RUN_DIR/report.html");
  report->callback([=] {
    Result<std::string> written = orchestrator::WriteRunReport(*run_dir, *out);
    if (!written.ok()) {
      *result = written.status();
      return;
    }
    std::cout << "report: " << *written << "\n";
  });
}

}  // namespace tessel::cli
