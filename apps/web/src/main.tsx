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
import './status.css';
import './parts.css';

declare global {
  interface Window {
    /** Read-only debug API for tests and the curious. */
    shoal: { getState: typeof snapshot };
  }
}
window.shoal = Object.freeze({ getState: snapshot });
applyTheme();

/**
 * The page for this URL (/, /host, /host/ROOM, /host?trainOn=ROOM, /join/ROOM?token=…,
 * /watch/ROOM?key=…) and its tab's title, so a person with several Shoal tabs tells them apart.
 */
function route() {
  const [, first, second] = location.pathname.split('/').map(decodeURIComponent);
  const query = new URLSearchParams(location.search);
  if (first === 'host') {
    const trainOn = query.get('trainOn');
    document.title = second
      ? `Room ${second} (host) · Shoal`
      : trainOn
        ? `Train on from ${trainOn} · Shoal`
        : 'Host a room · Shoal';
    return <HostPage roomId={second || null} trainOn={trainOn} />;
  }
  if (first === 'join' && second) {
    document.title = `Join room ${second} · Shoal`;
    return <VolunteerPage roomId={second} token={query.get('token')} />;
  }
  if (first === 'watch' && second) {
    document.title = `Watch room ${second} · Shoal`;
    return <WatchPage roomId={second} watchKey={query.get('key')} />;
  }
  return <Landing />;
}

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root element');
createRoot(root).render(<StrictMode>{route()}</StrictMode>);
// the landing and join pages show the adapter (the host and watch pages need none on the main thread)
if (location.pathname === '/' || location.pathname.startsWith('/join/')) void checkGpu();
