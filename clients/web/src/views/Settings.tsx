// The API token this browser sends (`authorization: Bearer …`), for a mesh that asks for one.
import { useState } from "react";
import { readToken, saveToken } from "../token";

export function Settings() {
  const [token, setToken] = useState(readToken);
  const [saved, setSaved] = useState(false);
  return (
    <section aria-labelledby="settings-title">
      <header className="view-head">
        <h1 id="settings-title">Settings</h1>
      </header>
      <form
        className="jobform"
        onSubmit={(event) => {
          event.preventDefault();
          saveToken(token);
          setSaved(true);
        }}
      >
        <div className="field">
          <label htmlFor="token">API token</label>
          <input id="token" type="password" value={token} onChange={(e) => { setToken(e.target.value); setSaved(false); }} autoComplete="off" />
          <p className="hint">Kept in this browser only; sent with every call as a bearer token. Empty: none.</p>
        </div>
        <div className="actions">
          <button type="submit" className="primary">
            Save
          </button>
          {saved ? <span role="status">Saved.</span> : null}
        </div>
      </form>
    </section>
  );
}
