import { getCollection } from 'astro:content';
import rss from '@astrojs/rss';

export async function GET(context) {
	const posts = await getCollection('blog');
	return rss({
		title: 'The Bakery Journal',
		description: 'Notes from the ovens.',
		site: context.site,
		items: posts.map((post) => ({ ...post.data, link: `/blog/${post.id}/` })),
	});
}
