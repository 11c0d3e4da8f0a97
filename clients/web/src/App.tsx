// The page: navigation, and the view the URL's #fragment names.
import { Board } from "./views/Board";
import { CreateJob } from "./views/CreateJob";
import { DeadLetters } from "./views/DeadLetters";
import { EditJob } from "./views/EditJob";
import { JobPage } from "./views/JobPage";
import { Jobs } from "./views/Jobs";
import { RunPage } from "./views/RunPage";
import { Settings } from "./views/Settings";
import { useRoute } from "./router";

function View({ parts }: { parts: string[] }) {
  const [first, job, third, run] = parts;
  if (first === "jobs" && job && third === "runs" && run) return <RunPage key={`${job}/${run}`} name={`jobs/${job}/runs/${run}`} />;
  if (first === "jobs" && job && third === "edit") return <EditJob key={job} name={`jobs/${job}`} />;
  if (first === "jobs" && job) return <JobPage key={job} name={`jobs/${job}`} />;
  if (first === "jobs") return <Jobs />;
  if (first === "new") return <CreateJob />;
  if (first === "dead-letters") return <DeadLetters />;
  if (first === "settings") return <Settings />;
  return <Board />;
}

const NAV = [
  ["", "Board"],
  ["jobs", "Jobs"],
  ["dead-letters", "Dead letters"],
  ["new", "New job"],
  ["settings", "Settings"],
] as const;

export function App() {
  const { parts } = useRoute();
  const here = parts[0] ?? "";
  return (
    <>
      <a className="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>
        Skip to content
      </a>
      <header className="top">
        <a className="brand" href="#/">
          jobmesh
        </a>
        <nav aria-label="Views">
          {NAV.map(([path, text]) => (
            <a key={path} href={`#/${path}`} aria-current={here === path ? "page" : undefined}>
              {text}
            </a>
          ))}
        </nav>
      </header>
      <main id="main" tabIndex={-1}>
        <View parts={parts} />
      </main>
    </>
  );
}
