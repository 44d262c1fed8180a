import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { checkGpu } from './gpu-check.ts';
import { HostPage } from './pages/HostPage.tsx';
import { Landing } from './pages/Landing.tsx';
import { VolunteerPage } from './pages/VolunteerPage.tsx';
import { WatchPage } from './pages/WatchPage.tsx';
import { snapshot } from './store.ts';
import { applyTheme } from './ui/parts.tsx';
import './styles.css';

declare global {
  interface Window {
    /** Read-only debug API for tests and the curious. */
    shoal: { getState: typeof snapshot };
  }
}
window.shoal = Object.freeze({ getState: snapshot });
applyTheme();

/** The page for this URL: /, /host, /host/ROOM, /join/ROOM?token=…, /watch/ROOM?key=… */
function route() {
  const [, first, second] = location.pathname.split('/').map(decodeURIComponent);
  const query = new URLSearchParams(location.search);
  if (first === 'host') return <HostPage roomId={second || null} trainOn={query.get('trainOn')} />;
  if (first === 'join' && second) return <VolunteerPage roomId={second} token={query.get('token')} />;
  if (first === 'watch' && second) return <WatchPage roomId={second} watchKey={query.get('key')} />;
  return <Landing />;
}

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root element');
createRoot(root).render(<StrictMode>{route()}</StrictMode>);
// the landing and join pages show the adapter (the host and watch pages need none on the main thread)
if (location.pathname === '/' || location.pathname.startsWith('/join/')) void checkGpu();
